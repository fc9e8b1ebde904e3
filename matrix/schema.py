"""The case file format: pydantic models, unknown keys rejected, no type coercion.

This module is the single source of truth for what a YAML case may say;
``python -m matrix schema`` prints the JSON Schema generated from it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Discriminator, Field, Tag, ValidationInfo, model_validator
from pydantic.json_schema import SkipJsonSchema

from matrix.engine_schema import Accept, Engine, Prefix, check_engine_rules
from matrix.events import (
    Event,
    RunBound,
    RunEvent,
    named_requests,
)
from matrix.limits import LIMITS, excess
from matrix.model_schema import (
    ENGINE_CONFIG_DEFAULT,
    FitSweep,
    LayoutSettings,
    ModelDescription,
    PromptInBlocks,
    check_model,
    pool_kind,
)
from matrix.strict import STRICT
from matrix.strict import PlacedError as PlacedError  # the loader reports it at its place
from matrix.variant_names import VARIANT_NAMES, VariantName, known_variants, unknown_variant

# How a run can fail (matrix/verdict.py says what each means). A case may pin one as the
# expectation for a variant, to say *how* it must fail.
FailureKind = Literal[
    "stall",
    "not_admitted",
    "preempted",
    "step_bound",
    "stuck",
    "expectation",
    "leak",
    "error",
    "timeout",
]
Expectation = Literal["pass", "fail", FailureKind]
ExpectKey = Literal["default"] | VariantName


class Strict(BaseModel):  # ruff knows a pydantic model by a base defined here
    model_config = STRICT


GroupKind = Literal["full", "sliding_window", "chunked_local", "mla", "mamba"]
MambaMode = Literal["none", "align", "all"]


class Group(Strict):
    """One KV cache group: the layers that share a block table."""

    kind: GroupKind
    block_size: Annotated[int, Field(gt=0)] | Literal["max_model_len"]
    window: Annotated[int, Field(gt=0)] | None = None  # a sliding window or an attention chunk
    # "all" (cache every block's state) exists in 0.30 and 0.31 only; later releases skip it.
    mamba_mode: MambaMode | None = None

    @model_validator(mode="after")
    def _kind_fields(self) -> Group:
        windowed = self.kind in ("sliding_window", "chunked_local")
        if windowed and self.window is None:
            raise ValueError(f"a {self.kind} group needs 'window'")
        if not windowed and self.window is not None:
            raise ValueError("'window' is only for sliding_window and chunked_local groups")
        if self.kind == "mamba" and self.mamba_mode is None:
            raise ValueError("a mamba group needs 'mamba_mode' (none, align or all)")
        if self.kind != "mamba" and self.mamba_mode is not None:
            raise ValueError(f"'mamba_mode' is only for mamba groups, not {self.kind}")
        if self.block_size == "max_model_len" and self.kind != "mamba":
            raise ValueError("block_size 'max_model_len' is only for mamba groups")
        return self

    def tokens_per_block(self, max_model_len: int) -> int:
        """The block size in tokens (``max_model_len`` is a Mamba group's one-block size)."""
        return max_model_len if self.block_size == "max_model_len" else self.block_size


class Speculative(Strict):
    """Speculative decoding as the engine would configure it.

    vLLM derives the lookahead from the method (0 for ngram, ``num_tokens`` for eagle and
    draft models); writing ``lookahead`` states that expectation and is checked.
    """

    method: Literal["ngram", "eagle", "draft_model"]
    num_tokens: Annotated[int, Field(ge=1, le=16)]
    lookahead: Annotated[int, Field(ge=0)] | None = None
    accept: Accept = "all"  # accepted drafts per decode step (see engine_schema.Accept)


class PoolSweep(Strict):
    """Every KV pool size from ``start`` to ``stop`` inclusive, in blocks."""

    start: Annotated[int, Field(ge=2)]
    stop: Annotated[int, Field(ge=2)]

    @model_validator(mode="after")
    def _ordered(self) -> PoolSweep:
        if self.stop < self.start:
            raise ValueError(f"stop ({self.stop}) is below start ({self.start})")
        return self


class RequestSpec(Strict):
    id: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")]
    prompt: Annotated[int, Field(gt=0)] | PromptInBlocks
    async_load: bool = True
    max_tokens: Annotated[int, Field(gt=0)] = 4
    prefix: Prefix | None = None
    # During ``run``, the remote side completes this request's load so many steps after
    # its admission.
    complete_load_after: Annotated[int, Field(ge=1, le=1000)] = 1

    def prompt_tokens(self) -> int:
        """The prompt's length (one given in blocks is counted out by the adapters first)."""
        if not isinstance(self.prompt, int):
            raise ValueError(f"request {self.id}: its prompt in blocks was never counted out")
        return self.prompt


class Axis(Strict):
    """One matrix axis and the values it takes.

    With ``path`` (a dotted path into this case), ``values`` is a list (labels are the values
    themselves) or a mapping label -> value. Without ``path``, ``values`` maps each label to
    an overlay ``{dotted.path: value, ...}``, for axes that change several places at once
    (for example a layout and the expectations that follow from it).
    """

    path: Annotated[str, Field(min_length=1)] | None = None
    values: list[Any] | dict[str, Any]

    @model_validator(mode="after")
    def _shape(self) -> Axis:
        if not self.values:
            raise ValueError("an axis needs at least one value")
        if self.path is None:
            if not isinstance(self.values, dict):
                raise ValueError("an axis without 'path' maps labels to overlays")
            for label, overlay in self.values.items():
                if not isinstance(overlay, dict) or not overlay:
                    raise ValueError(
                        f"value '{label}': an overlay is a mapping {{dotted.path: value, ...}}"
                    )
        return self

    def overlays(self, value: Any) -> dict[str, Any]:
        """The places this axis sets for one of its values."""
        if self.path is None:
            return {str(path): item for path, item in value.items()}
        return {self.path: value}


class CaseFile(Strict):
    """A whole case file, before matrix expansion."""

    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")]
    description: str = ""
    column: str | None = None
    # A model description (groups derived) or an engine config directory (see check_model).
    model: str = ENGINE_CONFIG_DEFAULT
    described: SkipJsonSchema[ModelDescription | None] = None  # the loader fills it in
    layout: LayoutSettings = LayoutSettings()
    max_model_len: Annotated[int, Field(ge=16)] = 1024
    groups: Annotated[list[Group], Field(min_length=1)] = []  # absent: a described model
    speculative: Speculative | None = None
    engine: Engine = Engine()
    pool: Annotated[
        Annotated[Annotated[int, Field(ge=2)], Tag("blocks")]
        | Annotated[PoolSweep, Tag("sweep")]
        | Annotated[FitSweep, Tag("fit")],
        Discriminator(pool_kind),
    ]
    requests: Annotated[list[RequestSpec], Field(min_length=1)]
    events: list[Event] = [RunEvent(run=RunBound())]
    expect: dict[ExpectKey, Expectation] = {}
    # Blocks of over-reservation tolerated: refusing a request is accepted at pools below its
    # fit plus this. The fix's margin rounds up per group, so a prompt that ends far from a
    # block boundary is refused at its exact fit by every margin variant; say so here.
    fit_slack: Annotated[int, Field(ge=0, le=64)] = 0
    # Every variant of the run (the built-ins and any loaded), unless the case names its own.
    variants: Annotated[list[VariantName], Field(min_length=1)] = list(VARIANT_NAMES)
    matrix: dict[str, Axis] = {}
    # Raises bounds of matrix/limits.py for this case, explicitly: {pool: 200000, ...}.
    limits: dict[str, Annotated[int, Field(ge=1)]] = {}

    def limit(self, name: str) -> int:
        return self.limits.get(name, LIMITS[name][0])

    @model_validator(mode="after")
    def _within_limits(self) -> CaseFile:
        problem = excess(self)
        if problem is not None:
            raise PlacedError(*problem)
        return self

    @model_validator(mode="after")
    def _consistent(self) -> CaseFile:
        check_model(
            self.model, self.described, bool(self.groups), "layout" in self.model_fields_set
        )
        seen: set[str] = set()
        for index, request in enumerate(self.requests):
            if request.id in seen:
                raise PlacedError(("requests", index, "id"), f"request id '{request.id}' repeats")
            seen.add(request.id)
            if isinstance(request.prompt, int) and (
                request.prompt + request.max_tokens > self.max_model_len
            ):
                raise PlacedError(
                    ("requests", index),
                    f"prompt + max_tokens ({request.prompt + request.max_tokens}) exceeds "
                    f"max_model_len ({self.max_model_len})",
                )
        modes = [(i, g.mamba_mode) for i, g in enumerate(self.groups) if g.kind == "mamba"]
        for index, mode in modes[1:]:
            if mode != modes[0][1]:
                raise PlacedError(
                    ("groups", index, "mamba_mode"),
                    "all mamba groups of a model share one mamba_mode",
                )
        for index, event in enumerate(self.events):
            if isinstance(event, RunEvent) and index < len(self.events) - 1:
                raise PlacedError(("events", index), "'run' ends a scenario: it must come last")
            unknown = sorted(set(named_requests(event)) - seen)
            if unknown:
                raise PlacedError(("events", index), f"unknown requests: {', '.join(unknown)}")
        check_engine_rules(self)
        for index, variant in enumerate(self.variants):
            if variant in self.variants[:index]:
                raise PlacedError(("variants", index), f"variant '{variant}' repeats")
        return self

    @model_validator(mode="after")
    def _known_variants(self, info: ValidationInfo) -> CaseFile:
        known = known_variants(info.context)
        for key in self.expect:
            if key != "default" and key not in known:
                raise PlacedError(("expect", key), unknown_variant(key, known))
        for index, variant in enumerate(self.variants):
            if variant not in known:
                raise PlacedError(("variants", index), unknown_variant(variant, known))
        return self

    def runs_variants(self, known: tuple[str, ...]) -> list[str]:
        """The variants this case runs: those it names, else every variant of the run."""
        return list(self.variants) if "variants" in self.model_fields_set else list(known)

    def expectation_for(self, variant: str) -> Expectation:
        """A built-in variant falls back to ``expect.default``; a user's variant that the case
        does not name is expected to pass (``default`` was written for the built-ins)."""
        if variant in self.expect or variant not in VARIANT_NAMES:
            return self.expect.get(variant, "pass")
        return self.expect.get("default", "pass")
