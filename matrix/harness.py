"""Runs a cell against the installed vLLM's real scheduler.

For each pool size: build a fresh scheduler through the version adapter, apply the variant to
that instance, add the requests, play the case's events with a step bound, and keep a snapshot
per step. The verdict module turns the snapshots into the cell's result.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field, replace
from time import monotonic as clock

from matrix.adapters import (
    FINISHED,
    LOADING,
    PREEMPTED,
    RUNNING,
    RequestState,
    SchedulerHandle,
    SchedulerState,
    StepOutcome,
    VersionAdapter,
)
from matrix.engine_schema import AbortEvent, FailLoadEvent
from matrix.expand import CellSpec
from matrix.model_schema import FitSweep
from matrix.schema import (
    CaseFile,
    CompleteLoadEvent,
    Event,
    RunBound,
    RunEvent,
    StateExpectation,
    StateName,
    StepEvent,
)
from matrix.variants import VARIANTS, Variant
from matrix.verdict import (
    CellVerdict,
    RunOutcome,
    RunTrace,
    StepRecord,
    StopReason,
    classify_run,
    judge_cell,
)

# A state unchanged over this many steps with nothing scheduled will never change again.
STUCK_AFTER = 2
# Engine steps after the last request finished within which every block must be back.
SETTLE_STEPS = 4


class CellTimeout(Exception):
    """A cell ran past its wall-clock limit (``limits.seconds``); carries the last state."""

    def __init__(self, step: int, state: SchedulerState) -> None:
        requests = ", ".join(
            f"{r.request_id} {state_name(r)} ({r.num_computed_tokens} tokens computed)"
            for r in state.requests
        )
        super().__init__(
            f"at step {step}: {requests}; {state.free_blocks} blocks free, "
            f"{state.reserved_blocks} reserved"
        )


@dataclass
class Scenario:
    """One run of a case's events on one scheduler."""

    handle: SchedulerHandle
    case: CaseFile
    records: list[StepRecord] = field(default_factory=list)
    completions_requested: set[str] = field(default_factory=set)
    failures_requested: set[str] = field(default_factory=set)
    # During ``run``: each request's load completes so many steps after its admission.
    completion_delays: dict[str, int] = field(default_factory=dict)
    admitted_at: dict[str, int] = field(default_factory=dict)
    # Aborted while loading: its blocks are freed once the worker reports the transfer.
    orphaned_loads: set[str] = field(default_factory=set)
    leak: str = ""  # the first block accounting violation
    deadline: float = math.inf  # on the clock; checked after every step

    def state(self) -> SchedulerState:
        return self.records[-1].state if self.records else self.handle.state()

    def _unreported_loads(self) -> set[str]:
        loading = {
            r.request_id
            for r in self.state().requests
            if r.status == LOADING and not r.load_reported_done
        }
        reported = {r.request_id for r in self.state().requests if r.load_reported_done}
        return loading | (self.orphaned_loads - reported)

    def _deliverable(self) -> set[str]:
        """Requested completions of loads in flight that the connector has not reported yet."""
        next_step = len(self.records) + 1
        due = {
            request_id
            for request_id, delay in self.completion_delays.items()
            if request_id in self.admitted_at and self.admitted_at[request_id] + delay <= next_step
        }
        return self._unreported_loads() & (self.completions_requested | due)

    def _failing(self) -> frozenset[str]:
        return frozenset(self._unreported_loads() & self.failures_requested)

    def step(self, record: bool = True) -> None:
        failing = self._failing()
        outcome = self.handle.step(self._deliverable() - failing, failing)
        state = self.handle.state()
        step = len(self.records) + 1
        for request in state.requests:
            if request.status == LOADING:
                self.admitted_at.setdefault(request.request_id, step)
        if record:
            scheduled = tuple(sorted(outcome.scheduled_tokens.items()))
            self.records.append(
                StepRecord(step, scheduled, state, outcome.free_blocks_while_running)
            )
        self._check_blocks(step, outcome)
        if clock() > self.deadline:
            raise CellTimeout(step, state)

    def _check_blocks(self, step: int, outcome: StepOutcome) -> None:
        if not self.leak:
            involved = sorted(outcome.scheduled_tokens) or None
            self.leak = self.handle.accounting().unbalanced(f"after step {step}", involved) or ""

    def abort(self, request_ids: list[str]) -> None:
        by_id = {r.request_id: r for r in self.state().requests}
        self.orphaned_loads |= {
            request_id
            for request_id in request_ids
            if by_id[request_id].status == LOADING and not by_id[request_id].load_reported_done
        }
        self.handle.abort(request_ids)

    def all_finished(self) -> bool:
        finished = all(r.status == FINISHED for r in self.state().requests)
        return finished and not (self.orphaned_loads & self._unreported_loads())

    def stuck(self) -> bool:
        if len(self.records) <= STUCK_AFTER or self._deliverable() or self._failing():
            return False
        recent = self.records[-(STUCK_AFTER + 1) :]
        return all(not r.scheduled and r.state == recent[0].state for r in recent)

    def run(self, bound: RunBound) -> StopReason:
        """Steps until done or stuck; the remote side completes each load its
        ``complete_load_after`` steps after admission."""
        for request in self.case.requests:
            self.completion_delays.setdefault(request.id, request.complete_load_after)
        for _ in range(bound.max_steps):
            if self.all_finished():
                return self.settle()
            self.step()
            if self.stuck():
                return "stuck"
        return self.settle() if self.all_finished() else "step_bound"

    def settle(self) -> StopReason:
        """Every request finished: let batches in flight and deferred frees land (unrecorded,
        so step counts are the requests'), then every block must be free again."""
        for _ in range(SETTLE_STEPS):
            if self.handle.settled():
                break
            self.step(record=False)
        if not self.leak:
            self.leak = self.handle.accounting().not_all_free() or ""
        return "finished"


def state_name(request: RequestState) -> StateName:
    """A request's state in the words of a step's ``expect``."""
    if request.status == FINISHED:
        return "finished"
    if request.status == RUNNING:
        return "running"
    if request.status == PREEMPTED:
        return "preempted"
    if request.load_reported_done:
        return "loaded"
    return "loading" if request.status == LOADING else "waiting"


def unmet_expectation(expect: StateExpectation, state: SchedulerState, step: int) -> str | None:
    by_id = {r.request_id: r for r in state.requests}
    for wanted, request_ids in expect.by_state().items():
        for request_id in request_ids:
            actual = state_name(by_id[request_id])
            if actual != wanted:
                return f"after step {step}: {request_id} is {actual}, expected {wanted}"
    return None


def play(scenario: Scenario, events: list[Event]) -> tuple[StopReason, str]:
    """Plays the events; returns how the run stopped and the first unmet expectation, if any.

    An unmet expectation does not stop the scenario: playing on shows whether the scheduler
    then stalls, which matters more than the expectation."""
    unmet = ""
    for event in events:
        if isinstance(event, CompleteLoadEvent):
            scenario.completions_requested |= set(event.complete_load)
        elif isinstance(event, FailLoadEvent):
            scenario.failures_requested |= set(event.fail_load)
        elif isinstance(event, AbortEvent):
            scenario.abort(event.abort)
        elif isinstance(event, StepEvent):
            for _ in range(event.step):
                scenario.step()
            if event.expect is not None and not unmet:
                step = len(scenario.records)
                unmet = unmet_expectation(event.expect, scenario.state(), step) or ""
    # The schema allows a run only as the last event; without one, the scenario still ends
    # with a run, so every case is judged on whether its requests finish.
    last = events[-1] if events else None
    return scenario.run(last.run if isinstance(last, RunEvent) else RunBound()), unmet


def run_scenario(
    adapter: VersionAdapter,
    case: CaseFile,
    variant: Variant | str,
    pool: int,
    deadline: float = math.inf,
) -> RunTrace:
    """One run at one pool size; ``variant`` is a built-in's name or any :class:`Variant`."""
    rule = VARIANTS[variant] if isinstance(variant, str) else variant
    scenario: Scenario | None = None
    try:
        handle = adapter.build(case, pool)
        rule.apply(handle)
        for request in case.requests:
            handle.add_request(request)
        scenario = Scenario(handle, case, deadline=deadline)
        stopped, unmet = play(scenario, list(case.events))
        return RunTrace(
            pool, tuple(scenario.records), stopped, unmet_expectation=unmet, leak=scenario.leak
        )
    except CellTimeout:
        raise
    except Exception as error:  # vLLM raising is an outcome to report, not a crash
        records = tuple(scenario.records) if scenario else ()
        leak = scenario.leak if scenario else ""
        return RunTrace(pool, records, "error", f"{type(error).__name__}: {error}", leak=leak)


def ample_pool(case: CaseFile) -> int:
    sizes = [g.tokens_per_block(case.max_model_len) for g in case.groups]
    # A request never holds more than max_model_len tokens per group; the slack covers Mamba's
    # speculative state blocks (at most one per speculative token) and the null block.
    return sum(math.ceil(case.max_model_len / size) + 32 for size in sizes)


# Keyed by the case's content: every variant of a case shares one measurement.
_fit_cache: dict[str, int] = {}


def measure_fit(adapter: VersionAdapter, case: CaseFile, deadline: float = math.inf) -> int:
    """The smallest pool in which each request, alone, runs to completion: its peak usage.

    Measured on the stock scheduler with an ample pool, where admission is never refused, so it
    depends on what requests allocate, not on any reservation rule.
    """
    cache_key = case.model_dump_json(
        include={"model", "layout", "max_model_len", "groups", "speculative", "engine", "requests"}
    )
    if cache_key in _fit_cache:
        return _fit_cache[cache_key]
    ample = ample_pool(case)
    fit = 0
    for request in case.requests:
        alone = case.model_copy(
            update={"requests": [request], "events": [RunEvent(run=RunBound())]}
        )
        trace = run_scenario(adapter, alone, "stock", ample, deadline)
        if trace.stopped != "finished":
            raise RuntimeError(
                f"request {request.id} does not finish alone in {ample} blocks: "
                f"{classify_run(trace).diagnosis}"
            )
        fit = max(fit, ample - _least_free(trace.steps))
    _fit_cache[cache_key] = fit
    return fit


def forget_fits() -> None:
    """Drops measured fits (for benchmarks that time a cold cell)."""
    _fit_cache.clear()


def _least_free(records: tuple[StepRecord, ...]) -> int:
    return min(min(r.free_blocks_while_running, r.state.free_blocks) for r in records)


def pool_sizes(case: CaseFile, fit: int | None = None) -> list[int]:
    """The pools a case runs at; a sweep relative to the fit needs the fit."""
    if isinstance(case.pool, int):
        return [case.pool]
    if isinstance(case.pool, FitSweep):
        if fit is None:
            raise ValueError("a pool sweep relative to the fit needs the fit")
        return list(range(max(2, fit - case.pool.below), fit + case.pool.above + 1))
    return list(range(case.pool.start, case.pool.stop + 1))


def run_cell(
    adapter: VersionAdapter, cell: CellSpec, variant: Variant | None = None
) -> CellVerdict:
    """Runs one cell at every pool size of its case and judges it against the case's fit.
    ``variant`` is the cell's variant when it is not a built-in (a user's, loaded by the run).
    """
    # One deadline for the whole cell: a case that somehow runs for minutes fails saying where
    # it was, and the session goes on with the next cell.
    deadline = clock() + cell.case.spec.limit("seconds")
    try:
        case = adapter.resolve(cell.case.spec)
        check_lookahead(adapter, case)
        fit = measure_fit(adapter, case, deadline)
    except CellTimeout as timeout:
        return _timed_out(cell, "measuring the fit", timeout, 0, [])
    except Exception as error:  # a case vLLM cannot run is a failing cell, not a crash
        return CellVerdict("fail", "error", f"{type(error).__name__}: {error}", 0, ())
    outcomes: list[RunOutcome] = []
    for pool in pool_sizes(case, fit):
        try:
            trace = run_scenario(adapter, case, variant or cell.variant, pool, deadline)
        except CellTimeout as timeout:
            return _timed_out(cell, f"pool {pool}", timeout, fit, outcomes, pool)
        outcomes.append(classify_run(trace))
    verdict = judge_cell(outcomes, fit, case.fit_slack)
    if case.described is None:
        return verdict
    groups = case.model_dump_json(include={"groups", "requests"})
    return replace(verdict, layout_digest=hashlib.sha256(groups.encode()).hexdigest()[:12])


def _timed_out(
    cell: CellSpec,
    where: str,
    timeout: CellTimeout,
    fit: int,
    outcomes: list[RunOutcome],
    pool: int | None = None,
) -> CellVerdict:
    seconds = cell.case.spec.limit("seconds")
    detail = f"{cell.test_id} ran past {seconds} s (limits.seconds), {where}, {timeout}"
    return CellVerdict("fail", "timeout", detail, fit, tuple(outcomes), (pool,) if pool else ())


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
