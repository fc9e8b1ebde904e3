"""A layout class's cells (docs/sweep.md): one case file per class, generated from the class
alone by the rules below, so architectures sharing a class are credited together and no
expectation is copied from another model. Pure: a class key in, case-file data out.

The scenarios: one async load, or two (the head's load completes first, then the run); a prompt
of whole attention blocks (``aligned``) or one token past a boundary (``past``); speculative
decoding off (``k0``) or EAGLE with one token (``eagle1``); with Mamba groups, both cache modes.

The rules (G attention groups, M Mamba groups; N = 1 + 2k tokens for EAGLE's first step):

- without speculation every variant passes, but Mamba ``align`` one token past a block, where a
  promotion needs a second state block the admission does not count: every variant but
  ``proposed`` stalls (M >= 1);
- EAGLE, whole blocks: the first step needs a new block in each attention group, so ``none``
  stalls where G >= 1, and ``original`` (one scheduler block) too where G >= 2;
- EAGLE, one token past, attention only: the step fits in the prompt's last block, yet every
  margin rounds up in each attention group and refuses the request at its fit
  (``not_admitted``): ``original``, ``group_count``, ``all_groups``, ``fixed`` (``none`` and
  ``proposed`` pass). With Mamba groups NIXL loads all but the prompt's last token, so the load
  ends on a boundary and the step needs its attention block: no margin over-reserves there;
- EAGLE, Mamba ``none``: ``group_count`` and ``all_groups`` reserve for the Mamba groups too,
  whose one block never grows, and refuse the request at its fit whatever the prompt; without
  attention (G = 0) ``original``'s one block is such a margin as well;
- EAGLE, Mamba ``align``, one token past: the promotion takes a second state block, so ``none``
  and ``fixed`` (no Mamba margin) stall, and ``original`` where G >= 1 (its one block goes to the
  attention group's step; without attention it covers the state block); ``group_count`` and
  ``all_groups``, whose Mamba margin covers it, pass;
- two loads are held to the single load's expectations: the tail's own margin does not save the
  head where the head's is short, and a refusal at the fit is one request's.

Pools: from two below the fit to one block over the most a margin can over-reserve (a block per
group) above it, so a refused request's pool sweep reaches a pool that finishes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from matrix.case.layout_class import ClassGroup, class_slug, parse_class

MARGIN_VARIANTS = ("original", "group_count", "all_groups", "fixed")
SPECS: dict[str, dict[str, Any] | None] = {
    "k0": None,
    "eagle1": {"method": "eagle", "num_tokens": 1},
}
# vLLM refuses EAGLE beside chunked local attention on the hybrid KV cache manager (Llama 4):
# those classes speculate with ngram, whose first step is 1 + k tokens.
CHUNKED_SPECS: dict[str, dict[str, Any] | None] = {
    "k0": None,
    "ngram1": {"method": "ngram", "num_tokens": 1},
}
PROMPTS = {"aligned": 0, "past": 1}
LOADS = ("one", "two")


@dataclass(frozen=True)
class Shape:
    """What the rules read of a class: its attention and Mamba groups, its largest block."""

    attention: int
    mamba: int
    largest_block: int

    @classmethod
    def of(cls, groups: tuple[ClassGroup, ...]) -> Shape:
        """The shape of a class's groups."""
        blocks = [g.block_size for g in groups if g.block_size is not None] or [16]
        return cls(
            sum(g.kind != "mamba" for g in groups),
            sum(g.kind == "mamba" for g in groups),
            max(blocks),
        )


def expectations(shape: Shape, mode: str | None, spec: str, prompt: str) -> dict[str, str]:
    """Each variant's expectation where it is not ``pass`` (the rules above)."""
    expect: dict[str, str] = {}
    align = mode == "align"
    if spec == "k0":
        if align and prompt == "past":
            expect.update({v: "stall" for v in ("none", *MARGIN_VARIANTS)})
        return expect
    if prompt == "aligned":
        if shape.attention:
            expect["none"] = "stall"
        if shape.attention >= 2:
            expect["original"] = "stall"
    elif align:
        expect.update({v: "stall" for v in ("none", "fixed")})
        if shape.attention:
            expect["original"] = "stall"
    elif shape.mamba == 0 and shape.attention:
        expect.update({v: "not_admitted" for v in MARGIN_VARIANTS})
    if mode == "none":
        expect.update({v: "not_admitted" for v in ("group_count", "all_groups")})
        if not shape.attention:
            expect["original"] = "not_admitted"
    return expect


def _groups(groups: tuple[ClassGroup, ...], mode: str | None) -> list[dict[str, Any]]:
    """The class's groups as a case writes them, in ``mode``: a Mamba group's block is one
    of max_model_len in ``none`` and the attention block in ``align`` (vLLM's rule)."""
    attention = [g.block_size for g in groups if g.kind != "mamba" and g.block_size]
    written = []
    for group in groups:
        data = group.as_group().model_dump(exclude_none=True, exclude_defaults=True)
        if group.kind == "mamba":
            data["mamba_mode"] = mode
            block = attention[0] if attention else 16
            data["block_size"] = "max_model_len" if mode == "none" else block
        written.append(data)
    return written


def _requests(shape: Shape, loads: str, offset: int) -> list[dict[str, Any]]:
    """Four whole blocks of 16 tokens, or one of a hybrid's large attention block, and the
    offset; without attention (a pure Mamba class) 64 tokens, a Mamba block's 16 four times."""
    blocks = 1 if shape.largest_block > 64 else 4
    prompt: int | dict[str, int] = {"blocks": blocks, "offset": offset}
    if not shape.attention:
        prompt = 4 * 16 + offset
    ids = ("a",) if loads == "one" else ("head", "tail")
    return [{"id": name, "prompt": prompt, "max_tokens": 4} for name in ids]


def _events(loads: str) -> list[dict[str, Any]]:
    if loads == "one":
        return [{"run": {}}]
    return [{"step": 1}, {"complete_load": ["head"]}, {"step": 2}, {"run": {"max_steps": 200}}]


def class_case(key: str) -> dict[str, Any]:
    """The class's case file, as data (YAML's)."""
    groups = parse_class(key)
    shape = Shape.of(groups)
    modes: tuple[str | None, ...] = ("none", "align") if shape.mamba else (None,)
    runs: dict[str, dict[str, Any]] = {}
    specs = CHUNKED_SPECS if any(g.kind == "chunked_local" for g in groups) else SPECS
    for mode in modes:
        for spec, speculative in specs.items():
            for prompt, offset in PROMPTS.items():
                for loads in LOADS:
                    label = "-".join(p for p in (mode, spec, prompt, loads) if p)
                    overlay: dict[str, Any] = {
                        "speculative": speculative,
                        "requests": _requests(shape, loads, offset),
                        "events": _events(loads),
                    }
                    if mode is not None:
                        overlay["groups"] = _groups(groups, mode)
                    for variant, outcome in expectations(shape, mode, spec, prompt).items():
                        overlay[f"expect.{variant}"] = outcome
                    runs[label] = overlay
    first = next(iter(runs.values()))
    return {
        "name": f"class_{class_slug(key)}",
        "description": (
            f"The layout class {key}: the architectures whose default config vLLM gives this "
            "layout (python -m matrix sweep), credited together. Generated by "
            "matrix/case/class_cases.py from the class alone; docs/sweep.md gives the rules."
        ),
        "max_model_len": max(1024, 4 * shape.largest_block),
        "groups": first.get("groups", _groups(groups, None)),
        "pool": {"below": 2, "above": len(groups) + 1},
        "requests": first["requests"],
        "matrix": {"run": {"values": runs}},
    }
