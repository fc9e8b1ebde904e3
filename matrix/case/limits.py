"""Every bound on what an input may ask for, in one place; docs/cases.md gives the reasons.

Case files come from contributors and from other repositories' hooks: they are input. Reading
is bounded before any schema (the file's size, its nesting, what its aliases expand to), and
the schema bounds what a case makes the harness build and run (pool sizes, tokens, steps,
cells), so a careless ``pool: 1000000000`` is refused instead of allocating a billion blocks.
Model files, JSON reports (CI artifacts, possibly from untrusted pull requests) and the run's
flags are input too: their bounds follow the case's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

# Reading, checked before the schema (so no case can raise them). A case is a few kilobytes and
# a few hundred values nested about seven deep; these leave a wide margin.
MAX_FILE_BYTES = 1_048_576
MAX_VALUES = 100_000  # after aliases and merge keys are expanded
MAX_DEPTH = 32  # a JSON file's too (a config.json nests about four, a report five)
# A JSON report or shard: the 1,757 cells of today's matrix with their pictured steps are
# 2.7 MB, so this holds a matrix twenty times larger.
MAX_REPORT_BYTES = 67_108_864

# A model's numbers (a description's keys, a config.json's): vLLM builds a layer object per
# layer and divides by the head counts, so a careless num_hidden_layers: 1000000000 would
# allocate a billion layers. The largest real models have about 130 layers and 128 heads.
MAX_LAYERS = 512
MAX_HEADS = 1024  # attention heads, and KV heads
MAX_HEAD_SIZE = 4096

# A report's pictures: today's full gallery is about 300 (MATRIX_PICTURES=all), the default
# choice about 80; a report (a shard's cells each with its own model, say) draws this many at
# most, about 30 s of CPU and 4 MB, and says how many it left out.
MAX_PICTURES = 1_000

# The run's flags: pytest-split builds every group of ``--splits`` (a shard's workers split it
# W times finer), and each worker of ``-n`` is a forked process.
MAX_SPLITS = 1024
MAX_WORKERS = 256

# A GitHub workflow's ``strategy.matrix`` played here (python -m matrix.ci.play): GitHub makes
# at most 256 jobs of one; the product of its lists is bounded before it is expanded (nine
# lists of ten values would be a billion combinations), as are its include and exclude entries.
MAX_MATRIX_JOBS = 256
MAX_MATRIX_PRODUCT = 4_096

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
    "seconds": (300, 3_600, "seconds"),  # the guard of one cell, in its own CPU seconds
}

Place = tuple[str | int, ...]


class Size(NamedTuple):
    """One size a case asks for: where it is written, the limit bounding it, its value, and
    what it is when the limit's unit does not say (``" in step: events together"``)."""

    place: Place
    limit: str
    value: int
    what: str = ""


def excess(overrides: Mapping[str, int], sizes: Iterable[Size]) -> tuple[Place, str] | None:
    """The first place where a case asks for more than its limits allow (``overrides`` are its
    ``limits:``), and why."""
    for name, value in overrides.items():
        if name not in LIMITS:
            return ("limits", name), f"no limit '{name}' (one of {', '.join(LIMITS)})"
        if value > LIMITS[name][1]:
            return ("limits", name), f"{value:,} is above the most it may be, {LIMITS[name][1]:,}"
    for place, name, value, what in sizes:
        limit = overrides.get(name, LIMITS[name][0])
        if value > limit:
            most, unit = LIMITS[name][1:]
            raise_it = f" (limits: {{{name}: N}} raises it, up to {most:,})" if limit < most else ""
            return place, f"{value:,} {unit}{what}, over the limit of {limit:,}{raise_it}"
    return None
