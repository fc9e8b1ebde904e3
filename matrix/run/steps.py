"""A failing cell's pictured runs: its first failing pool and its fit, run again with each KV
cache group's blocks per request read after every step (``PoolSteps``).

Only failing cells are run again, and only at the pools their picture draws, so a passing
cell pays nothing for pictures; the scheduler is deterministic, so the run again is the run
the cell was judged on. The events a picture marks come from the steps' request states.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

from matrix.adapters.protocol import FINISHED, LOADING, RUNNING, RequestState, VersionAdapter
from matrix.case.expansion import Cell
from matrix.run.playback import cell_clock
from matrix.run.pools import run_pool
from matrix.run.records import PoolSteps, RunTrace, StepMark
from matrix.run.variants import Variant


def record_steps(
    adapter: VersionAdapter,
    cell: Cell,
    variant: Variant | None,
    pools: Sequence[int],
    clock: Callable[[], float] = cell_clock,
) -> tuple[PoolSteps, ...]:
    """The cell's runs at ``pools`` (none: nothing is run), blocks recorded step by step,
    within the cell's own time limit; what could not be recorded is left out (a picture is
    never worth failing a cell over)."""
    if not pools:
        return ()
    definition = cell.case.definition
    deadline = clock() + definition.limit("seconds")
    recorded: list[PoolSteps] = []
    # A passed deadline (CellTimeout) or vLLM raising outside a run leaves the picture out:
    # the cell's own runs already reported it.
    with contextlib.suppress(Exception):
        case = adapter.resolve(definition)
        requests = tuple(r.id for r in case.requests)
        for pool in pools:
            trace = run_pool(
                adapter, case, variant or cell.variant, pool, deadline, clock, record_blocks=True
            )
            if trace.groups:
                recorded.append(pool_steps(trace, requests))
    return tuple(recorded)


def pool_steps(trace: RunTrace, requests: tuple[str, ...]) -> PoolSteps:
    """A recorded trace as its picture's data: free and held blocks per step, and the marks."""
    return PoolSteps(
        pool=trace.pool,
        groups=trace.groups,
        requests=requests,
        free=tuple(record.state.free_blocks for record in trace.steps),
        held=trace.held,
        marks=step_marks(trace),
        stopped=trace.stopped,
    )


def _changes(before: RequestState | None, after: RequestState) -> list[str]:
    """What happened to a request in one step, in the order a picture lists it."""
    was_loading = before is not None and before.status == LOADING
    happened = []
    if after.status == LOADING and not was_loading:
        happened.append("admitted")
    if after.load_reported_done and not (before and before.load_reported_done):
        happened.append("loaded")
    if after.status == RUNNING and not (before and before.status == RUNNING):
        happened.append("running")
    if after.num_preemptions > (before.num_preemptions if before else 0):
        happened.append("preempted")
    if after.status == FINISHED and not (before and before.status == FINISHED):
        happened.append("finished")
    return happened


def step_marks(trace: RunTrace) -> tuple[StepMark, ...]:
    """Each request's events step by step, then where the run stopped changing (a stuck run:
    the first step of the unchanged stretch it ended on) or where vLLM raised."""
    marks = []
    before: dict[str, RequestState] = {}
    for record in trace.steps:
        for request in record.state.requests:
            for what in _changes(before.get(request.request_id), request):
                marks.append(StepMark(record.step, what, request.request_id))
            before[request.request_id] = request
    if trace.stopped == "stuck" and trace.steps:
        last = trace.steps[-1]
        first = last.step
        for record in reversed(trace.steps):
            if record.scheduled or record.state != last.state:
                break
            first = record.step
        marks.append(StepMark(first, "stops"))
    elif trace.stopped == "error":
        marks.append(StepMark(trace.steps[-1].step if trace.steps else 0, "error"))
    return tuple(marks)
