"""How one run (one pool size) ended, from its per-step snapshots only (no vLLM needed).

- ``finished``: every request finished.
- ``tier_unfilled``: not run: the connector's tier could not be filled with what the case says
  it holds, because the request that stores it cannot run to its end in this pool. Not a
  failure, and no reservation's doing: the pool is not judged.
- ``stall``: a request whose async load completed is never scheduled while nothing runs and
  no step changes anything: the engine would hang for good. This is the bug the matrix pins.
- ``not_admitted``: a request was never admitted, with nothing else left to run.
- ``preempted``: a request ran, was preempted, and never resumed.
- ``step_bound``: the state kept changing until the step bound (a livelock, or a bound too low).
- ``stuck``: nothing changes any more, in none of the shapes above.
- ``expectation``: the run finished, but a step's ``expect`` did not hold on the way.
- ``leak``: the block accounting failed: after some step, free + held (each block once) + the
  null block was not the pool, or blocks were still not free once every request finished.
- ``protocol``: a batch vLLM's model runner would refuse (``adapters/runner_protocol.py``): a
  request sent as new that the runner holds or as cached that it does not, a scheduled token
  or lookahead token without a slot, an async load holding other blocks than its tokens', a
  load scheduled before the worker reported it.
- ``error``: vLLM raised.
- ``timeout`` (a cell's, not a run's): the cell ran past its limit of CPU time
  (``limits.seconds``); see ``matrix.judge.verdict``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from matrix.adapters.protocol import FINISHED, RUNNING, WAITING, RequestState
from matrix.frozen import fast_init
from matrix.outcomes import FailureKind
from matrix.run.records import RunTrace
from matrix.wording import plural

RunKind = Literal["finished", "tier_unfilled", FailureKind]


@fast_init
@dataclass(frozen=True)
class RunOutcome:
    """How the run at one pool size ended, and the diagnosis in words."""

    pool: int
    kind: RunKind
    diagnosis: str


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


def _blocks(count: int | None) -> str:
    return "unknown" if count is None else plural(count, "block")


def _where(trace: RunTrace) -> str:
    if not trace.steps:
        return f"pool {trace.pool} blocks"
    last = trace.steps[-1]
    return (
        f"pool {trace.pool} blocks, {last.state.free_blocks} free, "
        f"reservation in force {_blocks(trace.reserved)}, after step {last.step}"
    )


def classify_run(trace: RunTrace) -> RunOutcome:
    """How the run ended; when it finished, whether its step expectations held. An unmet
    expectation does not stop a run, so a failure that follows it is what gets reported."""
    if trace.leak:  # blocks lost or double-counted: whatever else happened rests on that
        return RunOutcome(trace.pool, "leak", f"{trace.leak}; {_where(trace)}")
    if trace.protocol:  # the engine's worker would have failed or written the wrong blocks
        return RunOutcome(trace.pool, "protocol", f"{trace.protocol}; {_where(trace)}")
    ended = _how_it_ended(trace)
    if trace.unmet_expectation and ended.kind == "finished":
        return RunOutcome(trace.pool, "expectation", f"{trace.unmet_expectation}; {_where(trace)}")
    return ended


def _how_it_ended(trace: RunTrace) -> RunOutcome:
    if trace.stopped == "finished":
        return RunOutcome(
            trace.pool, "finished", f"all requests finished in {plural(len(trace.steps), 'step')}"
        )
    if trace.stopped == "tier_unfilled":
        return RunOutcome(trace.pool, "tier_unfilled", f"tier not filled: {trace.message}")
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
