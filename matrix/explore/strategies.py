"""Hypothesis strategies for whole scenarios, drawn as the case format's own data.

A :class:`Draw` is a case file's mapping (what ``matrix.case.format.CaseFile`` validates) without
its pool, plus where its pool window lies against the fit: the fit is measured on the
scheduler, so the pool is set once the fit is known (``Draw.case_data``). Everything shrinks
towards the simplest scenario: one full-attention group of block size 4, no speculation, one
request, no events before the run, the pool at the fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

# Block sizes of attention groups; a Mamba group in align mode shares the first group's size,
# in mode none it is one block of max_model_len (as engines configure them).
BLOCK_SIZES = (4, 8, 16, 32)
WINDOWS = (8, 16, 32, 64, 128)
MAMBA_MODES = ("none", "align")
METHODS = ("eagle", "ngram", "draft_model")
MAX_SPEC_TOKENS = 7
MAX_GROUPS = 4
REQUEST_IDS = ("a", "b", "c", "d")
MAX_PROMPT = 160
# A request with max_tokens 1 finishes at its first token, before any speculative step, so
# every margin variant refuses it at its fit by the whole margin: a known cost of a margin
# that is an upper bound, which would otherwise be most of what a search finds.
MIN_NEW_TOKENS = 2
MAX_NEW_TOKENS = 8
# The pool window: its lowest size is the fit plus an offset in this range, and it covers up
# to MAX_SPAN more sizes. A stall shows below the fit (admitted, then short of the first
# step's slots), refusals above it; a narrow window keeps a scenario a few scheduler runs.
OFFSETS = (-12, 4)
MAX_SPAN = 2
RUN_STEPS = 200

# Built once: a strategy made inside a composite is validated again on every draw (most of a
# draw's cost). The same strategies draw the same scenarios from the same choices.
_block_size = st.sampled_from(BLOCK_SIZES)
_mamba_mode = st.sampled_from(MAMBA_MODES)
_extra_kind = st.sampled_from(("full", "sliding_window", "mamba"))
_window = {size: st.sampled_from([w for w in WINDOWS if w >= size]) for size in BLOCK_SIZES}
_extra_groups = st.integers(0, MAX_GROUPS - 1)
_spec_tokens = st.integers(0, MAX_SPEC_TOKENS)
_method = st.sampled_from(METHODS)
_request_count = st.integers(1, len(REQUEST_IDS))
_prompt = st.integers(1, MAX_PROMPT)
_flag = st.booleans()
_new_tokens = st.integers(MIN_NEW_TOKENS, MAX_NEW_TOKENS)
_event_count = st.integers(0, 3)
_steps = st.integers(1, 3)
_offset = st.integers(*OFFSETS)
_span = st.integers(0, MAX_SPAN)
# Per request ids: the orders loads complete in, and how many of them an event completes.
_orders: dict[tuple[str, ...], st.SearchStrategy[list[str]]] = {}
_completed = {count: st.integers(1, count) for count in range(1, len(REQUEST_IDS) + 1)}


@dataclass(frozen=True)
class Draw:
    """One drawn scenario: a case without its pool, and the pool window against the fit."""

    data: dict[str, Any]
    offset: int
    span: int

    def pools(self, fit: int) -> tuple[int, int]:
        """The window's first and last pool size (a pool has at least 2 blocks)."""
        start = max(2, fit + self.offset)
        return start, start + self.span

    def case_data(self, fit: int) -> dict[str, Any]:
        """The case file's data with its pool: the window placed against ``fit``."""
        start, stop = self.pools(fit)
        pool: int | dict[str, int] = start if start == stop else {"start": start, "stop": stop}
        return {**self.data, "pool": pool}


@st.composite
def groups(draw: st.DrawFn) -> list[dict[str, Any]]:
    """1-4 KV cache groups: full attention first (every hybrid model has one), then full,
    sliding window or Mamba groups. All Mamba groups share one mode, and a layout with Mamba
    has one attention block size, as hybrid models' engines unify it."""
    first_size = draw(_block_size)
    mode = draw(_mamba_mode)
    kinds = ["full"] + [draw(_extra_kind) for _ in range(draw(_extra_groups))]
    hybrid = "mamba" in kinds
    layout: list[dict[str, Any]] = []
    for index, kind in enumerate(kinds):
        if kind == "mamba":
            size: int | str = first_size if mode == "align" else "max_model_len"
            layout.append({"kind": "mamba", "block_size": size, "mamba_mode": mode})
            continue
        block_size = first_size if hybrid or index == 0 else draw(_block_size)
        group: dict[str, Any] = {"kind": kind, "block_size": block_size}
        if kind == "sliding_window":  # real windows span blocks
            group["window"] = draw(_window[block_size])
        layout.append(group)
    return layout


@st.composite
def speculative(draw: st.DrawFn) -> dict[str, Any] | None:
    """0-7 speculative tokens (0: no speculative decoding) and the method."""
    tokens = draw(_spec_tokens)
    if tokens == 0:
        return None
    return {"method": draw(_method), "num_tokens": tokens}


@st.composite
def requests(draw: st.DrawFn) -> list[dict[str, Any]]:
    """1-4 requests with their prompt lengths, load kinds and new tokens."""
    count = draw(_request_count)
    return [
        {
            "id": request_id,
            "prompt": draw(_prompt),
            "async_load": not draw(_flag),  # shrinks towards an async load
            "max_tokens": draw(_new_tokens),
        }
        for request_id in REQUEST_IDS[:count]
    ]


@st.composite
def events(draw: st.DrawFn, request_ids: list[str]) -> list[dict[str, Any]]:
    """Steps and load completions (timing and order) before the final run, which completes
    every load still in flight a step after its admission."""
    played: list[dict[str, Any]] = []
    ids = tuple(request_ids)
    if ids not in _orders:
        _orders[ids] = st.permutations(ids)
    for _ in range(draw(_event_count)):
        if draw(_flag):
            order = draw(_orders[ids])
            played.append({"complete_load": order[: draw(_completed[len(order)])]})
        else:
            played.append({"step": draw(_steps)})
    return [*played, {"run": {"max_steps": RUN_STEPS}}]


# The parts of a scenario, built once as the strategies above are.
_groups = groups()
_speculative = speculative()
_requests = requests()
_events: dict[tuple[str, ...], st.SearchStrategy[list[dict[str, Any]]]] = {}


def events_of(request_ids: list[str]) -> st.SearchStrategy[list[dict[str, Any]]]:
    """:func:`events` for these requests, built once per list of ids."""
    ids = tuple(request_ids)
    if ids not in _events:
        _events[ids] = events(list(ids))
    return _events[ids]


@st.composite
def scenarios(draw: st.DrawFn) -> Draw:
    """A whole scenario: groups, speculative decoding, requests, events and the pool window."""
    layout = draw(_groups)
    spec = draw(_speculative)
    drawn_requests = draw(_requests)
    data: dict[str, Any] = {"name": "explored", "groups": layout}
    if spec is not None:
        data["speculative"] = spec
    data["requests"] = drawn_requests
    data["events"] = draw(events_of([r["id"] for r in drawn_requests]))
    offset = draw(_offset)
    return Draw(data, offset, draw(_span))


def layout_family(data: dict[str, Any]) -> str:
    """What distinguishes layouts when deduplicating failures, in the upstream table's
    columns: a Mamba mode, else different block sizes, else several groups, else one."""
    if "groups" not in data:  # a described model (an escalated model case)
        return str(data.get("model", "model"))
    modes = sorted({str(g["mamba_mode"]) for g in data["groups"] if g["kind"] == "mamba"})
    if modes:
        return f"mamba_{modes[0]}"
    if len({g["block_size"] for g in data["groups"]}) > 1:
        return "different_block_sizes"
    return "multiple_groups" if len(data["groups"]) > 1 else "single_group"
