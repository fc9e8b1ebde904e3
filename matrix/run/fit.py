"""A case's fit: the smallest pool in which each of its requests, alone, runs to completion,
measured on the stock scheduler in an ample pool (so it depends on what requests allocate,
not on any reservation rule), once per case content; and the smallest pool in which any of
them is admitted at all, below which nothing can happen, so nothing can fail."""

from __future__ import annotations

import math
from collections.abc import Callable

from matrix.adapters.protocol import WAITING, VersionAdapter, ample_pool
from matrix.case.events import RunBound, RunEvent
from matrix.case.format import CaseFile
from matrix.run.playback import cell_clock
from matrix.run.pools import run_pool
from matrix.run.records import Fit, StepRecord, Together
from matrix.wording import plural

# Keyed by what the runs read of the case (CaseFile.run_key): its variants share one.
_fits: dict[str, Fit] = {}


def measure_fit(
    adapter: VersionAdapter,
    case: CaseFile,
    deadline: float = math.inf,
    clock: Callable[[], float] = cell_clock,
) -> Fit:
    """The case's fit: each request's peak usage when it runs alone in an ample pool, and
    the least any request's admission takes. Raises ``RuntimeError`` when a request does not
    finish alone."""
    key = case.run_key(without=frozenset({"pool", "events"}))
    if key in _fits:
        return _fits[key]
    # Once per case content, like the fit (a failure is never cached, so it fails every cell).
    check_lookahead(adapter, case)
    ample = ample_pool(case)
    admits_from = ample
    each: list[int] = []
    for request in case.requests:
        arrived = request.model_copy(update={"arrive_after": 0})  # alone, it need not wait
        alone = case.model_copy(
            update={"requests": [arrived], "events": [RunEvent(run=RunBound())]}
        )
        trace = run_pool(adapter, alone, "stock", ample, deadline, clock)
        if trace.stopped != "finished":
            why = f": {trace.message}" if trace.message else ""
            raise RuntimeError(
                f"request {request.id} does not finish alone in {ample} blocks: it stopped "
                f"{trace.stopped} after {plural(len(trace.steps), 'step')}{why}"
            )
        each.append(ample - _least_free(trace.steps))
        admitted = next((r for r in trace.steps if r.state.requests[0].status != WAITING), None)
        if admitted is not None:
            admits_from = min(admits_from, ample - _least_free((admitted,)))
    fit = max(each)
    _fits[key] = Fit(fit, min(admits_from, fit), tuple(each))
    return _fits[key]


def together(case: CaseFile, fit: Fit, judged_as: str) -> tuple[Together, ...]:
    """The case's ``concurrency:`` for a cell held to ``judged_as``'s expectations, each pool
    resolved: where none is stated, the pool the loads fit in together (each one's fit, the
    null block counted once) plus the over-reservation the case tolerates (``fit_slack``), and
    nothing is said below it."""
    place = {request.id: index for index, request in enumerate(case.requests)}
    resolved = []
    for check in case.concurrency:
        stated = check.stated_pool(judged_as)
        joint = 1 + sum(fit.each[place[load]] - 1 for load in check.loads) + case.fit_slack
        exact = check.exact and stated is not None
        resolved.append(Together(tuple(check.loads), stated or joint, exact))
    return tuple(resolved)


def forget_fits() -> None:
    """Drops measured fits (for benchmarks that time a cold cell)."""
    _fits.clear()


def _least_free(records: tuple[StepRecord, ...]) -> int:
    return min(min(r.free_blocks_while_running, r.state.free_blocks) for r in records)


def check_lookahead(adapter: VersionAdapter, case: CaseFile) -> None:
    """A case that states a lookahead must get it from vLLM's own rule for the method."""
    if case.speculative is None or case.speculative.lookahead is None:
        return
    derived = adapter.build(case, ample_pool(case)).geometry().num_lookahead_tokens
    if derived != case.speculative.lookahead:
        raise ValueError(
            f"speculative.lookahead is {case.speculative.lookahead} but vLLM "
            f"derives {derived} for method {case.speculative.method}"
        )
