"""Every bound on what a case file may ask for, in one place; docs/cases.md gives the reasons.

Case files come from contributors and from other repositories' hooks: they are input. Reading
is bounded before any schema (the file's size, its nesting, what its aliases expand to), and
the schema bounds what a case makes the harness build and run (pool sizes, tokens, steps,
cells), so a careless ``pool: 1000000000`` is refused instead of allocating a billion blocks.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

from matrix.events import RunEvent, StepEvent
from matrix.model_schema import FitSweep, PromptInBlocks

if TYPE_CHECKING:
    from matrix.schema import CaseFile

# Reading, checked before the schema (so no case can raise them). A case is a few kilobytes and
# a few hundred values nested about seven deep; these leave a wide margin.
MAX_FILE_BYTES = 1_048_576
MAX_VALUES = 100_000  # after aliases and merge keys are expanded
MAX_DEPTH = 32

# What a case builds and runs: name -> (default, the most ``limits: {name: N}`` may raise it
# to, unit). Sized so real models' layouts fit with a wide margin.
LIMITS: dict[str, tuple[int, int, str]] = {
    "pool": (65_536, 1_048_576, "blocks"),
    "sweep": (513, 4_096, "pool sizes"),
    "block_size": (16_384, 1_048_576, "tokens"),
    "max_model_len": (262_144, 1_048_576, "tokens"),
    "requests": (256, 4_096, "requests"),
    "tokens": (2_097_152, 16_777_216, "prompt and output tokens"),
    "steps": (10_000, 1_000_000, "steps"),
    "cells": (1_000, 10_000, "cells"),
    "seconds": (300, 3_600, "seconds"),  # the wall-clock guard of one cell
}

Place = tuple[str | int, ...]


def _sizes(case: CaseFile) -> Iterator[tuple[Place, str, int, str]]:
    """(place in the case, limit, value, what the value is) for every size a limit bounds."""
    if isinstance(case.pool, FitSweep):  # sized by the fit, once measured: only its length here
        yield ("pool",), "sweep", case.pool.below + case.pool.above + 1, ""
    elif isinstance(case.pool, int):
        yield ("pool",), "pool", case.pool, ""
    else:
        yield ("pool",), "pool", case.pool.stop, ""
        yield ("pool",), "sweep", case.pool.stop - case.pool.start + 1, ""
    yield ("max_model_len",), "max_model_len", case.max_model_len, ""
    # The fit is measured in a pool that holds a request of max_model_len tokens.
    sequence_blocks = 0
    for index, group in enumerate(case.groups):
        size = group.tokens_per_block(case.max_model_len)
        sequence_blocks += math.ceil(case.max_model_len / size)
        yield ("groups", index, "block_size"), "block_size", size, ""
        yield ("groups", index, "window"), "max_model_len", group.window or 0, ""
    yield (
        ("max_model_len",),
        "pool",
        sequence_blocks,
        " to hold max_model_len tokens in every group",
    )
    yield ("requests",), "requests", len(case.requests), ""
    # A prompt in blocks is bounded by its own schema (64 blocks) until the layout is known.
    tokens = sum(
        (0 if isinstance(r.prompt, PromptInBlocks) else r.prompt) + r.max_tokens
        for r in case.requests
    )
    yield ("requests",), "tokens", tokens, ""
    steps = sum(e.step for e in case.events if isinstance(e, StepEvent))
    yield ("events",), "steps", steps, " in step: events together"
    for index, event in enumerate(case.events):
        if isinstance(event, RunEvent):
            yield ("events", index, "run", "max_steps"), "steps", event.run.max_steps, ""
    cells = math.prod(len(axis.values) for axis in case.matrix.values()) * len(case.variants)
    yield ("matrix",), "cells", cells, " from the axes times the variants"


def excess(case: CaseFile) -> tuple[Place, str] | None:
    """The first place where ``case`` asks for more than its limits allow, and why."""
    for name, value in case.limits.items():
        if name not in LIMITS:
            return ("limits", name), f"no limit '{name}' (one of {', '.join(LIMITS)})"
        if value > LIMITS[name][1]:
            return ("limits", name), f"{value:,} is above the most it may be, {LIMITS[name][1]:,}"
    for place, name, value, what in _sizes(case):
        limit = case.limit(name)
        if value > limit:
            return place, (
                f"{value:,} {LIMITS[name][2]}{what}, over the limit of {limit:,} "
                f"(limits: {{{name}: N}} raises it, up to {LIMITS[name][1]:,})"
            )
    return None
