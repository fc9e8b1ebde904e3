"""A run's live verdict, the pools a cell runs live, and a cell's agreement with the harness.
Pure: read from the same step records (``RunTrace``) the harness's runs produce.

The live verdict of a run, worst first:

- ``leak``: the block accounting failed (as the harness's ``leak``);
- ``error``: vLLM raised;
- ``step_bound``: still changing at the case's step bound;
- ``hang``: for N engine steps no request progressed, no load was left to report, and a
  request that was admitted (its load done, or it ran) waits unfinished;
- ``refused``: the same, but every unfinished request was never admitted;
- ``finished``: every request finished.

The same rule reads the harness's trace of the cell at that pool, so the two agree exactly when
the real engine ends a run as the harness's scheduler did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from matrix.adapters.protocol import FINISHED, PREEMPTED, RUNNING
from matrix.judge.verdict import pool_ranges
from matrix.run.records import RunTrace

LiveOutcome = Literal["finished", "hang", "refused", "step_bound", "error", "leak"]
PoolChoice = Literal["all", "failing"]
POOL_CHOICES: tuple[PoolChoice, ...] = ("all", "failing")


def live_outcome(trace: RunTrace) -> LiveOutcome:
    """How a run ended, in the live verdict's words (see the module's docstring)."""
    if trace.leak:
        return "leak"
    if trace.stopped in ("finished", "error", "step_bound"):
        return trace.stopped
    unfinished = [r for r in trace.steps[-1].state.requests if r.status != FINISHED]
    admitted = [
        r
        for r in unfinished
        if r.load_reported_done
        or r.num_computed_tokens > 0
        or r.num_preemptions > 0
        or r.status in (RUNNING, PREEMPTED)
    ]
    return "hang" if admitted else "refused"


def pools_to_run(
    swept: Sequence[int], failing: Sequence[int], choice: PoolChoice, fit: int
) -> list[int]:
    """The pools a cell runs live: every pool the harness swept, or (``failing``) its failing
    pools and their neighbours among the swept ones; a cell without one, its fit and the pool
    below, where its requests start to finish."""
    if choice == "all":
        return list(swept)
    wanted = {pool + offset for pool in failing for offset in (-1, 0, 1)} or {fit - 1, fit}
    return [pool for pool in swept if pool in wanted]


@dataclass(frozen=True)
class PoolAgreement:
    """One pool of a cell: the harness's run kind and live verdict, and the live engine's."""

    pool: int
    harness_kind: str  # matrix.judge.runs' kind of the harness's run
    harness: LiveOutcome  # the harness's run, read by the live rule
    live: LiveOutcome
    live_detail: str = ""  # vLLM's error, when the live run raised

    @property
    def agrees(self) -> bool:
        """Whether the real engine ended the run as the harness's scheduler did."""
        return self.harness == self.live


def outcome_ranges(pools: Sequence[PoolAgreement], harness: bool = False) -> str:
    """``finished 9-20; hang 8``: pools grouped by outcome (the live one, or the harness's)."""
    by_outcome: dict[str, list[int]] = {}
    for pool in pools:
        by_outcome.setdefault(pool.harness if harness else pool.live, []).append(pool.pool)
    return "; ".join(f"{outcome} {pool_ranges(sorted(p))}" for outcome, p in by_outcome.items())


def trace_lines(trace: RunTrace) -> list[str]:
    """A trace step by step, for a disagreement's detail: what ran, every request, free blocks."""
    lines = []
    for record in trace.steps:
        scheduled = ", ".join(f"{r} {n}" for r, n in record.scheduled) or "nothing"
        requests = ", ".join(
            f"{r.request_id} {r.status}{' loaded' if r.load_reported_done else ''} "
            f"{r.num_computed_tokens}{f' preempted {r.num_preemptions}x' * bool(r.num_preemptions)}"
            for r in record.state.requests
        )
        lines.append(
            f"step {record.step}: scheduled {scheduled}; {requests}; "
            f"{record.state.free_blocks} free"
        )
    lines.append(f"stopped: {trace.stopped}" + (f" ({trace.message})" if trace.message else ""))
    if trace.leak:
        lines.append(f"leak: {trace.leak}")
    return lines
