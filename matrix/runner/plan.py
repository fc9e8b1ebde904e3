"""What ``python -m matrix run -- ARGS`` asks for, read from pytest's arguments: how many
workers, whether this is one shard of a CI split (pytest-split's ``--splits``/``--group``),
and whether the workers are forked after vLLM's import (the default) or pytest-xdist's (a
GPU per worker needs them: a forked worker inherits a process that already imported torch).
Pure: reads the arguments and the environment only.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from matrix.case.limits import MAX_SPLITS, MAX_WORKERS

MAX_DEFAULT_WORKERS = 4
# Recorded cell durations pytest-split balances shards by, in each cases folder
# (``--store-durations`` writes them); cells it has no figure for count as the average.
DURATIONS = "durations.json"


class PlanError(Exception):
    """Arguments ``run`` cannot honour; the message is one line."""


@dataclass(frozen=True)
class RunPlan:
    """How to run: ``workers`` processes (1: this one), one ``shard`` (group, splits) of a CI
    split or the whole run, on pytest-xdist's workers or forked ones, and pytest's other
    arguments."""

    workers: int
    shard: tuple[int, int] | None
    xdist: bool
    pytest_args: tuple[str, ...]
    reports: tuple[Path, ...] = ()  # ``--matrix-report`` files the arguments add
    junitxml: Path | None = None  # pytest's ``--junitxml`` when the arguments ask for it

    @property
    def forked(self) -> bool:
        """Whether workers are forked from this process after vLLM's import."""
        return self.workers > 1 and not self.xdist

    def shard_args(self) -> list[str]:
        """pytest's arguments for this run's CI shard (none for a whole run)."""
        return [f"--splits={self.shard[1]}", f"--group={self.shard[0]}"] if self.shard else []


def _workers(value: str, cpus: int) -> int:
    if value in ("auto", "logical"):
        return max(1, min(cpus, MAX_WORKERS))
    try:
        workers = int(value)
    except ValueError:
        workers = -1
    if not 0 <= workers <= MAX_WORKERS:
        raise PlanError(
            f"-n {value[:40]}: a number of workers from 0 (this process alone) to "
            f"{MAX_WORKERS}, or auto"
        )
    return max(1, workers)


def _shard(splits: int, group: int) -> tuple[int, int]:
    """``--splits N --group K`` as (K, N): N first, so a wrong N is not blamed on K."""
    if not 1 <= splits <= MAX_SPLITS:
        raise PlanError(f"--splits {splits}: a number of shards from 1 to {MAX_SPLITS}")
    if not 1 <= group <= splits:
        raise PlanError(f"--group {group}: one of 1 ... {splits}")
    return group, splits


def plan_run(
    pytest_args: Sequence[str], environ: Mapping[str, str] | None = None, cpus: int | None = None
) -> RunPlan:
    """The plan for these arguments: ``-n N`` (default: a worker per core, up to four),
    ``--splits N --group K``, and xdist when ``--matrix-gpus`` or a ``CUDA_VISIBLE_DEVICES``
    listing several GPUs asks for a GPU per worker (or ``--dist``/``--tx`` name xdist's own
    scheduling)."""
    environ = os.environ if environ is None else environ
    cpus = (os.cpu_count() or 1) if cpus is None else cpus
    reader = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    reader.add_argument("-n", "--numprocesses", dest="workers")
    reader.add_argument("--splits", type=int)
    reader.add_argument("--group", type=int)
    reader.add_argument("--matrix-report", action="append", default=[], type=Path)
    reader.add_argument("--junitxml", "--junit-xml", type=Path)
    try:
        known, rest = reader.parse_known_args(list(pytest_args))
    except argparse.ArgumentError as error:  # --splits x: one line, not argparse's usage
        raise PlanError(str(error)) from None
    if (known.splits is None) != (known.group is None):
        raise PlanError("--splits N and --group K go together")
    shard = None if known.splits is None else _shard(known.splits, known.group)
    if "--store-durations" in rest:
        workers = 1  # pytest-split records one process's durations; workers would each write
    elif known.workers is None:
        workers = min(MAX_DEFAULT_WORKERS, cpus)
    else:
        workers = _workers(known.workers, cpus)
    gpus = [g for g in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    xdist = any(a.startswith(("--matrix-gpus", "--dist", "--tx")) for a in rest) or len(gpus) > 1
    return RunPlan(workers, shard, xdist, tuple(rest), tuple(known.matrix_report), known.junitxml)
