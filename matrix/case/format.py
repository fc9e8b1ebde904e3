"""The case file: every part of a case (``parts``, ``events``, ``engine``, ``model``) in one
pydantic model, unknown keys rejected, no type coercion, and the rules spanning its parts.

This module is the single source of truth for what a YAML case may say;
``python -m matrix schema`` prints the JSON Schema generated from it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Annotated, Literal

from pydantic import (
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from matrix.case.config_json import ConfigModel
from matrix.case.connector import (
    DEFAULT_CONNECTOR,
    ConnectorName,
    ConnectorOptions,
    check_connector_case,
    digest_exclusions,
)
from matrix.case.engine import Engine
from matrix.case.events import Concurrency, Event, RunBound, RunEvent, StepEvent, named_requests
from matrix.case.limits import LIMITS, Size, excess
from matrix.case.model import (
    FitSweep,
    LayoutSettings,
    ModelDescription,
    PromptInBlocks,
    pool_kind,
)
from matrix.case.model_paths import ENGINE_CONFIG_DEFAULT, check_model
from matrix.case.parts import (
    Axis,
    Group,
    PoolSweep,
    RequestSpec,
    Speculative,
    cache_block_size,
    check_prefixes_and_accept,
)
from matrix.case.strict import PlacedError, Strict
from matrix.case.when import When, check_when
from matrix.case.workload import StartableSweep, Workload, with_workload_requests
from matrix.outcomes import FailureKind
from matrix.variant_names import VARIANT_NAMES, VariantName, known_variants, unknown_variant

# What a case's name may be: it is the start of every id, table row and picture name.
CASE_NAME = r"[A-Za-z0-9_.-]+"
Expectation = Literal["pass", "fail", FailureKind]
ExpectKey = Literal["default"] | VariantName

# What only names a case or judges its runs: cases that differ in these alone run alike, so
# whatever caches what a run produces keys on the rest (see CaseFile.run_key).
NAMING_AND_JUDGING = frozenset(
    {
        "name",
        "description",
        "column",
        "expect",
        "concurrency",
        "when",
        "fit_slack",
        "variants",
        "matrix",
        "limits",
    }
)


class CaseFile(Strict):
    """A whole case file, before matrix expansion."""

    # A case writes its requests out or draws them from a workload: one of the two.
    model_config = {
        **Strict.model_config,
        "json_schema_extra": {"oneOf": [{"required": ["requests"]}, {"required": ["workload"]}]},
    }

    name: Annotated[str, Field(min_length=1, pattern=f"^{CASE_NAME}$")]
    description: str = ""
    column: str | None = None
    # A model file, its config.json or a description (groups derived), or an engine config
    # directory (groups written out): matrix/case/model_paths.py.
    model: str = ENGINE_CONFIG_DEFAULT
    # The model file's contents: the loader fills it in.
    described: SkipJsonSchema[ModelDescription | ConfigModel | None] = None
    layout: LayoutSettings = LayoutSettings()
    max_model_len: Annotated[int, Field(ge=16)] = 1024
    groups: Annotated[list[Group], Field(min_length=1)] = []  # absent: a described model
    speculative: Speculative | None = None
    engine: Engine = Engine()
    # The KV connector whose scheduler side the loads go through (matrix/case/connector.py).
    connector: ConnectorName = DEFAULT_CONNECTOR
    connector_options: ConnectorOptions = ConnectorOptions()
    pool: Annotated[
        Annotated[Annotated[int, Field(ge=2)], Tag("blocks")]
        | Annotated[PoolSweep, Tag("sweep")]
        | Annotated[FitSweep, Tag("fit")]
        | Annotated[StartableSweep, Tag("startable")],
        Discriminator(pool_kind),
    ]
    # A stream of requests drawn from a seed (matrix/case/workload.py), or ``requests``.
    workload: Workload | None = None
    # At least one (the rule is in _consistent: a workload's requests are drawn, not written).
    requests: list[RequestSpec] = []
    events: list[Event] = [RunEvent(run=RunBound())]
    expect: dict[ExpectKey, Expectation] = {}
    # Async loads in flight together from a pool up (a decision, not an outcome: matrix/judge/
    # tightness.py judges it per pool).
    concurrency: list[Concurrency] = []
    # Blocks of over-reservation tolerated: refusing a request is accepted at pools below its
    # fit plus this. The fix's margin rounds up per group, so a prompt that ends far from a
    # block boundary is refused at its exact fit by every margin variant; say so here.
    fit_slack: Annotated[int, Field(ge=0, le=64)] = 0
    # Every variant of the run (the built-ins and any loaded), unless the case names its own.
    variants: Annotated[list[VariantName], Field(min_length=1)] = list(VARIANT_NAMES)
    matrix: dict[str, Axis] = {}
    # Expectations where several axes take given labels together (matrix/case/when.py).
    when: list[When] = []
    # Raises bounds of matrix/case/limits.py for this case, explicitly: {pool: 200000, ...}.
    limits: dict[str, Annotated[int, Field(ge=1)]] = {}

    def limit(self, name: str) -> int:
        """The bound ``name`` of matrix/case/limits.py for this case (its ``limits:`` or the
        default)."""
        return self.limits.get(name, LIMITS[name][0])

    def served(self) -> CaseFile:
        """The case as an engine sized for its requests runs it: ``max_model_len`` the longest
        request's prompt and output plus its last step's speculative tokens (prompts given in
        blocks must be counted out first)."""
        spec_tokens = self.speculative.num_tokens if self.speculative else 0
        longest = max(r.prompt_tokens() + r.max_tokens for r in self.requests) + spec_tokens
        return self.model_copy(update={"max_model_len": longest})

    def run_key(self, *, without: frozenset[str] = frozenset()) -> str:
        """The case as its runs read it: everything but what names it or judges it (and the
        fields ``without``). A cache of what runs produce keys on this, so a new field is part
        of every such key unless it is listed in ``NAMING_AND_JUDGING``."""
        return self.model_dump_json(exclude=set(NAMING_AND_JUDGING | without))

    @model_validator(mode="before")
    @classmethod
    def _drawn_requests(cls, data: object) -> object:
        """A workload's requests, drawn from its seed, are the case's requests."""
        try:
            return with_workload_requests(data)
        except ValidationError:  # the workload itself is wrong: said at its own keys
            return data

    @model_validator(mode="after")
    def _within_limits(self) -> CaseFile:
        problem = excess(self.limits, self._sizes())
        if problem is not None:
            raise PlacedError(*problem)
        return self

    def _sizes(self) -> Iterator[Size]:
        """Every size of this case that a limit bounds."""
        if isinstance(self.pool, FitSweep):  # sized by the fit, once measured: its length here
            yield Size(("pool",), "sweep", self.pool.below + self.pool.above + 1)
        elif isinstance(self.pool, StartableSweep):  # sized by vLLM's start-up sizing, later
            yield Size(("pool",), "sweep", self.pool.above_startable + 1)
        elif isinstance(self.pool, int):
            yield Size(("pool",), "pool", self.pool)
        else:
            yield Size(("pool",), "pool", self.pool.stop)
            yield Size(("pool",), "sweep", self.pool.stop - self.pool.start + 1)
        yield Size(("max_model_len",), "max_model_len", self.max_model_len)
        # The fit is measured in a pool that holds a request of max_model_len tokens.
        sequence_blocks = 0
        for index, group in enumerate(self.groups):
            size = group.tokens_per_block(self.max_model_len)
            sequence_blocks += math.ceil(self.max_model_len / size)
            yield Size(("groups", index, "block_size"), "block_size", size)
            yield Size(("groups", index, "window"), "max_model_len", group.window or 0)
        holding = " to hold max_model_len tokens in every group"
        yield Size(("max_model_len",), "pool", sequence_blocks, holding)
        yield Size(("requests",), "requests", len(self.requests))
        # A prompt in blocks is bounded by its own schema (64 blocks) until the layout is known.
        tokens = sum(
            (0 if isinstance(r.prompt, PromptInBlocks) else r.prompt) + r.max_tokens
            for r in self.requests
        )
        yield Size(("requests",), "tokens", tokens)
        steps = sum(e.step for e in self.events if isinstance(e, StepEvent))
        yield Size(("events",), "steps", steps, " in step: events together")
        for index, event in enumerate(self.events):
            if isinstance(event, RunEvent):
                yield Size(("events", index, "run", "max_steps"), "steps", event.run.max_steps)
        cells = math.prod(len(axis.values) for axis in self.matrix.values()) * len(self.variants)
        yield Size(("matrix",), "cells", cells, " from the axes times the variants")

    @model_validator(mode="after")
    def _consistent(self) -> CaseFile:
        check_model(
            self.model, self.described, bool(self.groups), "layout" in self.model_fields_set
        )
        if not self.requests:
            raise PlacedError(("requests",), "at least one request (or a workload of them)")
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
            if isinstance(event, RunEvent):
                for place, request in enumerate(self.requests):
                    if request.arrive_after >= event.run.max_steps:
                        raise PlacedError(
                            ("requests", place, "arrive_after"),
                            f"arrives after {request.arrive_after} steps, but the run ends "
                            f"after {event.run.max_steps} (run.max_steps)",
                        )
            unknown = sorted(set(named_requests(event)) - seen)
            if unknown:
                raise PlacedError(("events", index), f"unknown requests: {', '.join(unknown)}")
        for index, together in enumerate(self.concurrency):
            unknown = sorted(set(together.loads) - seen)
            if unknown:
                raise PlacedError(
                    ("concurrency", index, "loads"), f"unknown requests: {', '.join(unknown)}"
                )
            local = [r.id for r in self.requests if r.id in together.loads and not r.async_load]
            if local:
                raise PlacedError(
                    ("concurrency", index, "loads"), f"not async loads: {', '.join(local)}"
                )
        check_prefixes_and_accept(self.requests, self.speculative)
        check_when(self.when, {name: axis.labels() for name, axis in self.matrix.items()})
        for index, variant in enumerate(self.variants):
            if variant in self.variants[:index]:
                raise PlacedError(("variants", index), f"variant '{variant}' repeats")
        return self

    @model_validator(mode="after")
    def _connector_settings(self) -> CaseFile:
        blocks = [g.block_size for g in self.groups if isinstance(g.block_size, int)]
        check_connector_case(
            self.connector,
            self.connector_options,
            self.requests,
            set(self.connector_options.model_fields_set),
            blocks,
            cache_block_size(self.groups, self.max_model_len) if self.groups else None,
        )
        return self

    def identity_json(self) -> str:
        """What the case says, as its digest reads it: the connector's fields left out where
        they hold their defaults, so a case that names no connector keeps its digest."""
        return self.model_dump_json(exclude=digest_exclusions(self))

    @model_validator(mode="after")
    def _known_variants(self, info: ValidationInfo) -> CaseFile:
        known = known_variants(info.context)
        for key in self.expect:
            if key != "default" and key not in known:
                raise PlacedError(("expect", key), unknown_variant(key, known))
        for index, variant in enumerate(self.variants):
            if variant not in known:
                raise PlacedError(("variants", index), unknown_variant(variant, known))
        for index, together in enumerate(self.concurrency):
            stated = together.from_pool if isinstance(together.from_pool, dict) else {}
            for key in stated:
                if key != "default" and key not in known:
                    where = ("concurrency", index, "from_pool", key)
                    raise PlacedError(where, unknown_variant(key, known))
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
