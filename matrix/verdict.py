"""Classifies what the scheduler did, from per-step snapshots only (no vLLM needed).

One run (one pool size) ends in one of these kinds:

- ``finished``: every request finished.
- ``stall``: a request whose async load completed is never scheduled while nothing runs and
  no step changes anything: the engine would hang for good. This is the bug the matrix pins.
- ``not_admitted``: a request was never admitted, with nothing else left to run.
- ``preempted``: a request ran, was preempted, and never resumed.
- ``step_bound``: the state kept changing until the step bound (a livelock, or a bound too low).
- ``stuck``: nothing changes any more, in none of the shapes above.
- ``expectation``: the run finished, but a step's ``expect`` did not hold on the way.
- ``leak``: the block accounting failed: after some step, free + held (each block once) + the
  null block was not the pool, or blocks were still not free once every request finished.
- ``error``: vLLM raised.
- ``timeout``: the cell ran past its wall-clock limit (``limits.seconds``); it names the pool
  and the last state, and the session goes on with the next cell.

A cell (a case under one variant, over its pool sizes) passes when no pool size shows a
failure; what counts as one depends on the pool against the case's *fit*, the smallest pool
in which each request alone runs to completion, measured (see :func:`acceptable`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from matrix.adapters import FINISHED, RUNNING, WAITING, RequestState, SchedulerState
from matrix.schema import FailureKind

RunKind = Literal["finished", FailureKind]
StopReason = Literal["finished", "stuck", "step_bound", "error"]


@dataclass(frozen=True)
class StepRecord:
    step: int
    scheduled: tuple[tuple[str, int], ...]
    state: SchedulerState
    free_blocks_while_running: int


@dataclass(frozen=True)
class RunTrace:
    """Everything one scenario run produced, as plain data."""

    pool: int
    steps: tuple[StepRecord, ...]
    stopped: StopReason
    message: str = ""  # the error, when stopped is "error"
    unmet_expectation: str = ""  # the first step expectation that did not hold
    leak: str = ""  # the first block accounting violation


@dataclass(frozen=True)
class RunOutcome:
    pool: int
    kind: RunKind
    diagnosis: str


@dataclass(frozen=True)
class CellVerdict:
    observed: Literal["pass", "fail"]
    kind: RunKind
    detail: str
    fit: int  # the smallest pool in which every request, alone, runs to completion
    outcomes: tuple[RunOutcome, ...]
    failing_pools: tuple[int, ...] = ()  # the pool sizes whose outcome is not acceptable
    # Identifies the layout a described model ran with on this release (its derived groups), so
    # cells of releases that derive different layouts are never compared as equals.
    layout_digest: str = ""


def _describe(request: RequestState) -> str:
    preempted = f", preempted {request.num_preemptions}x" if request.num_preemptions else ""
    return (
        f"{request.request_id} (status {request.status}, "
        f"{request.num_computed_tokens} tokens computed{preempted})"
    )


def _first_step_reported_done(trace: RunTrace, request_id: str) -> int | None:
    for record in trace.steps:
        for request in record.state.requests:
            if request.request_id == request_id and request.load_reported_done:
                return record.step
    return None


def _where(trace: RunTrace) -> str:
    if not trace.steps:
        return f"pool {trace.pool} blocks"
    last = trace.steps[-1]
    return (
        f"pool {trace.pool} blocks, {last.state.free_blocks} free, "
        f"reservation in force {last.state.reserved_blocks} blocks, after step {last.step}"
    )


def classify_run(trace: RunTrace) -> RunOutcome:
    """How the run ended; when it finished, whether its step expectations held. An unmet
    expectation does not stop a run, so a failure that follows it is what gets reported."""
    if trace.leak:  # blocks lost or double-counted: whatever else happened rests on that
        return RunOutcome(trace.pool, "leak", f"{trace.leak}; {_where(trace)}")
    ended = _how_it_ended(trace)
    if trace.unmet_expectation and ended.kind == "finished":
        return RunOutcome(trace.pool, "expectation", f"{trace.unmet_expectation}; {_where(trace)}")
    return ended


def _how_it_ended(trace: RunTrace) -> RunOutcome:
    if trace.stopped == "finished":
        return RunOutcome(
            trace.pool, "finished", f"all requests finished in {len(trace.steps)} steps"
        )
    where = _where(trace)
    if trace.stopped == "error":
        return RunOutcome(trace.pool, "error", f"{trace.message}; {where}")
    unfinished = [r for r in trace.steps[-1].state.requests if r.status != FINISHED]
    if trace.stopped == "step_bound":
        names = ", ".join(_describe(r) for r in unfinished)
        return RunOutcome(
            trace.pool, "step_bound", f"still changing at the step bound: {names}; {where}"
        )
    running = [r for r in unfinished if r.status == RUNNING]
    # A request that ran and was later preempted is not the stall, even if it came from a load.
    stalled = [r for r in unfinished if r.load_reported_done and r.num_preemptions == 0]
    if stalled and not running:
        head = stalled[0]
        since = _first_step_reported_done(trace, head.request_id)
        return RunOutcome(
            trace.pool,
            "stall",
            (
                f"{_describe(head)}: load completed at step {since} but never scheduled, "
                f"nothing running; {where}"
            ),
        )
    preempted = [r for r in unfinished if r.num_preemptions > 0]
    if preempted:
        return RunOutcome(
            trace.pool,
            "preempted",
            f"{_describe(preempted[0])}: preempted and never resumed; {where}",
        )
    never_admitted = [r for r in unfinished if r.status == WAITING and not r.load_reported_done]
    if never_admitted:
        return RunOutcome(
            trace.pool, "not_admitted", f"{_describe(never_admitted[0])}: never admitted; {where}"
        )
    names = ", ".join(_describe(r) for r in unfinished)
    return RunOutcome(trace.pool, "stuck", f"nothing changes any more: {names}; {where}")


def acceptable(outcome: RunOutcome, fit: int, slack: int = 0) -> bool:
    """A stall, a leak or an error is never right. From the fit up, every request must finish
    (refusing one that fits is over-reservation, tolerated up to ``slack`` blocks) and every
    step expectation must hold; below it the pool is too small for some request, and what the
    scheduler does then is its own call."""
    if outcome.kind == "finished":
        return True
    if outcome.kind in ("stall", "leak", "error"):
        return False
    if outcome.kind == "not_admitted":
        return outcome.pool < fit + slack
    return outcome.pool < fit


def _pool_ranges(pools: Sequence[int]) -> str:
    spans: list[list[int]] = []
    for pool in pools:
        if spans and pool == spans[-1][1] + 1:
            spans[-1][1] = pool
        else:
            spans.append([pool, pool])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def judge_cell(outcomes: Sequence[RunOutcome], fit: int, slack: int = 0) -> CellVerdict:
    """A cell's verdict from its runs, one per pool size: pass unless some run is unacceptable
    (see :func:`acceptable`); a failure names its kind, pools and first diagnosis."""
    fit_text = f"fit {fit}" + (f", slack {slack}" if slack else "")
    failures = [o for o in outcomes if not acceptable(o, fit, slack)]
    if not failures:
        finished = [o.pool for o in outcomes if o.kind == "finished"]
        unfinished = [o.pool for o in outcomes if o.kind != "finished"]
        detail = f"finished at pools {_pool_ranges(finished)}" if finished else "nothing finished"
        if unfinished:
            detail += f"; unfinished below the fit ({fit_text}) at {_pool_ranges(unfinished)}"
        if outcomes and max(o.pool for o in outcomes) < fit:
            detail += "; no pool reaches the fit, so only stalls and errors were checked"
        return CellVerdict("pass", "finished", detail, fit, tuple(outcomes))
    first = failures[0]
    same_kind = [o.pool for o in failures if o.kind == first.kind]
    other_kinds = sorted({o.kind for o in failures} - {first.kind})
    detail = (
        f"{first.kind} at pools {_pool_ranges(same_kind)} ({fit_text}); "
        f"pool {first.pool}: {first.diagnosis}"
    )
    if other_kinds:
        detail += f"; also {', '.join(other_kinds)}"
    failing_pools = tuple(o.pool for o in failures)
    return CellVerdict("fail", first.kind, detail, fit, tuple(outcomes), failing_pools)


def expectation_met(expected: str, verdict: CellVerdict) -> bool:
    """``expected`` is pass, fail, or a failure kind that the cell must fail with."""
    if expected in ("pass", "fail"):
        return verdict.observed == expected
    return verdict.observed == "fail" and verdict.kind == expected
