"""One run on one scheduler: steps with snapshots, load completions and failures delivered as
the worker would, aborts, the block accounting after every step, the deadline on the cell's own
CPU time, and the rule that decides a run can never change again ("stuck"). A case's events are
played on it by ``play_events``."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from time import process_time

from matrix.adapters.protocol import (
    FINISHED,
    LOADING,
    PREEMPTED,
    RUNNING,
    BlockAccount,
    ProtocolViolation,
    RequestState,
    SchedulerHandle,
    SchedulerState,
    StepOutcome,
)
from matrix.case.events import RunBound, StateName
from matrix.case.format import CaseFile
from matrix.case.parts import RequestSpec
from matrix.run.records import StepRecord, StopReason
from matrix.wording import plural

# A state unchanged over this many steps with nothing scheduled will never change again.
STUCK_AFTER = 2
# Engine steps after the last request finished within which every block must be back.
SETTLE_STEPS = 4

# The clock of a cell's guard (``limits.seconds``): this process's CPU seconds, the cell's own
# work. A busy or slowed machine stretches wall time, not this, so no verdict depends on load;
# a cell that waits (nothing here does) would not run out its guard, but every run is also
# bounded by its steps.
cell_clock: Callable[[], float] = process_time


class CellTimeout(Exception):
    """A cell ran past its limit (``limits.seconds`` of CPU time); carries the last state."""

    def __init__(self, step: int, state: SchedulerState, reserved: int) -> None:
        requests = ", ".join(
            f"{r.request_id} {state_name(r)} ({r.num_computed_tokens} tokens computed)"
            for r in state.requests
        )
        super().__init__(
            f"at step {step}: {requests}; {plural(state.free_blocks, 'block')} free, "
            f"{reserved} reserved"
        )


@dataclass
class Playback:
    """One run of a case's events on one scheduler, and what it has recorded so far."""

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
    protocol: str = ""  # the first batch vLLM's model runner would refuse, with its step
    reserved: int | None = None  # the reservation in force when the run stopped
    deadline: float = math.inf  # on ``clock``; checked after every step
    clock: Callable[[], float] = cell_clock  # injected by tests that need time to pass
    # Where a picture is drawn (run/steps.py), and only there: after each recorded step, each
    # group's blocks per request (in the case's request order); None: not recorded.
    held: list[tuple[tuple[int, ...], ...]] | None = None
    # The state before the first step, read once: the checks before a run's first step ask for
    # it several times, and reading it costs as much as a step's own bookkeeping.
    _before_first_step: SchedulerState | None = None
    # What ``_facts`` read, and of which state.
    _facts_of: SchedulerState | None = field(default=None, init=False, repr=False)
    _facts_read: tuple[set[str], set[str], bool] = field(init=False, repr=False)
    # The block account after the last step (None before one, or after an abort).
    _last_account: BlockAccount | None = field(default=None, init=False, repr=False)
    # The late requests (``arrive_after``) handed to the scheduler so far.
    _arrived: set[str] = field(default_factory=set, init=False, repr=False)
    _late: tuple[RequestSpec, ...] | None = field(default=None, init=False, repr=False)

    def state(self) -> SchedulerState:
        """The scheduler's state after the last recorded step, or before the first."""
        if self.records:
            return self.records[-1].state
        if self._before_first_step is None:
            self._before_first_step = self.handle.state()
        return self._before_first_step

    def _facts(self) -> tuple[set[str], set[str], bool]:
        """Of the current state, read once per state: the loading requests whose load the
        worker has not reported, the requests whose load it has, and whether every request
        finished."""
        state = self.state()
        if state is not self._facts_of:
            unreported: set[str] = set()
            reported: set[str] = set()
            finished = True
            for request in state.requests:
                if request.status != FINISHED:
                    finished = False
                if request.load_reported_done:
                    reported.add(request.request_id)
                elif request.status == LOADING:
                    unreported.add(request.request_id)
            self._facts_of, self._facts_read = state, (unreported, reported, finished)
        return self._facts_read

    def _unreported_loads(self) -> set[str]:
        """Loads in flight that the worker has not reported: loading requests' and aborted
        ones' (whose blocks wait for the transfer)."""
        loading, reported, _ = self._facts()
        if not self.orphaned_loads:
            return loading
        return loading | (self.orphaned_loads - reported)

    def _loads_to_report(self) -> tuple[set[str], frozenset[str]]:
        """What the worker reports in the next step: the loads that finish (asked for by an
        event, or due ``complete_load_after`` steps after admission), and those that fail."""
        unreported = self._unreported_loads()
        if not unreported:
            return set(), frozenset()
        failing = frozenset(unreported & self.failures_requested)
        next_step = len(self.records) + 1
        due = {
            request_id
            for request_id, delay in self.completion_delays.items()
            if request_id in self.admitted_at and self.admitted_at[request_id] + delay <= next_step
        }
        return (unreported & (self.completions_requested | due)) - failing, failing

    def _pending(self) -> list[RequestSpec]:
        """The late requests not handed to the scheduler yet: one due after as many steps as
        have run arrives before the next, so a run must not end before it."""
        late = self._late
        if late is None:
            late = self._late = tuple(r for r in self.case.requests if r.arrive_after)
        return [r for r in late if r.id not in self._arrived] if late else []

    def _arrive(self) -> None:
        """The requests whose time has come reach the scheduler, before the step."""
        step = len(self.records)
        for request in self._pending():
            if request.arrive_after <= step:
                self.handle.add_request(request)
                self._arrived.add(request.id)
                self._before_first_step = None

    def step(self, record: bool = True) -> None:
        """One engine step with the loads due to complete or fail; recorded unless ``record`` is
        false, then the blocks and the deadline checked."""
        self._arrive()
        step = len(self.records) + 1
        try:
            outcome = self.handle.step(*self._loads_to_report())
        except ProtocolViolation as broken:  # the violation first, then vLLM's error
            self.protocol = self.protocol or f"step {step}: {broken.violation}"
            raise broken.__cause__ or broken from None
        state = self.handle.state()
        self._before_first_step = None  # a step, recorded or not, moves the scheduler on
        for request in state.requests:
            if request.status == LOADING:
                self.admitted_at.setdefault(request.request_id, step)
        if record:
            scheduled = tuple(sorted(outcome.scheduled_tokens.items()))
            self.records.append(
                StepRecord(step, scheduled, state, outcome.free_blocks_while_running)
            )
            if self.held is not None:
                self.held.append(self.handle.blocks_held([r.id for r in self.case.requests]))
        if outcome.violation and not self.protocol:
            self.protocol = f"step {step}: {outcome.violation}"
        self._check_blocks(step, outcome)
        if self.clock() > self.deadline:
            raise CellTimeout(step, state, self.handle.reservation())

    def _check_blocks(self, step: int, outcome: StepOutcome) -> None:
        if self.leak:
            return
        account = self._last_account = self.handle.accounting()
        if account.missing():
            involved = sorted(outcome.scheduled_tokens) or None
            self.leak = account.unbalanced(f"after step {step}", involved) or ""

    def abort(self, request_ids: list[str]) -> None:
        """Aborts these requests; a load in flight among them keeps its blocks until reported."""
        by_id = {r.request_id: r for r in self.state().requests}
        self.orphaned_loads |= {
            request_id
            for request_id in request_ids
            if by_id[request_id].status == LOADING and not by_id[request_id].load_reported_done
        }
        self.handle.abort(request_ids)
        self._before_first_step = None  # an abort before any step changes it
        self._last_account = None

    def all_finished(self) -> bool:
        """Every request arrived and finished, and every aborted load's transfer reported."""
        if not self._facts()[2] or self._pending():
            return False
        return not (self.orphaned_loads and self.orphaned_loads & self._unreported_loads())

    def stuck(self) -> bool:
        """Whether the run can never change: the same state, nothing scheduled or to deliver."""
        if len(self.records) <= STUCK_AFTER or self.records[-1].scheduled or self._pending():
            return False
        # The records first: they differ on almost every step of a run that makes progress.
        recent = self.records[-(STUCK_AFTER + 1) :]
        if not all(not r.scheduled and r.state == recent[0].state for r in recent):
            return False
        finishing, failing = self._loads_to_report()
        # A load the remote side completes later (``complete_load_after`` steps after its
        # admission, more than the steps looked at here) will change the run, as a store the
        # connector's worker has yet to report can still free blocks.
        later = any(
            request_id in self.admitted_at and request_id in self.completion_delays
            for request_id in self._unreported_loads()
        )
        return not (finishing or failing or later or self.handle.connector_busy())

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
                self.reserved = self.handle.reservation()
                return "stuck"
        if self.all_finished():
            return self.settle()
        self.reserved = self.handle.reservation()
        return "step_bound"

    def settle(self) -> StopReason:
        """Every request finished: let batches in flight and deferred frees land (unrecorded,
        so step counts are the requests'), then every block must be free again."""
        self.reserved = self.handle.reservation()
        for _ in range(SETTLE_STEPS):
            if self.handle.settled():
                break
            self.step(record=False)
        if not self.leak:
            # Reading the reservation and whether it settled moves nothing: the account after
            # the last step, if one was taken since the last abort, is the account now.
            account = self._last_account or self.handle.accounting()
            self.leak = account.not_all_free() or ""
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
        return "loaded" if request.status == LOADING else "promoted"
    return "loading" if request.status == LOADING else "waiting"


# The states a step's ``expect`` accepts for each word: ``loaded`` is any reported load not yet
# running, promoted out of ``WAITING_FOR_REMOTE_KVS`` or not.
ACCEPTED: dict[StateName, frozenset[StateName]] = {
    "loaded": frozenset({"loaded", "promoted"}),
}
