"""Playback's own rules, on a scripted scheduler handle (no vLLM): when a run is stuck, what it
waits for before saying so, how it settles, when it reports a leak and when time is up."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from matrix.adapters.protocol import (
    FINISHED,
    LOADING,
    RUNNING,
    WAITING,
    BlockAccount,
    Geometry,
    RequestState,
    SchedulerState,
    Status,
    StepOutcome,
)
from matrix.case.format import CaseFile
from matrix.case.parts import RequestSpec
from matrix.run.play_events import play
from matrix.run.playback import SETTLE_STEPS, STUCK_AFTER, CellTimeout, Playback

CASE = CaseFile.model_validate(
    {
        "name": "scripted",
        "groups": [{"kind": "full", "block_size": 4}],
        "pool": 10,
        "requests": [{"id": "a", "prompt": 8}],
    }
)


@dataclass
class ScriptedHandle:
    """A scheduler handle whose request has status ``script[n]`` after ``n`` steps (the last
    repeating), and which reports what it was asked."""

    script: list[Status]
    scheduled_while: tuple[Status, ...] = (RUNNING,)
    unsettled_steps: int = 0  # steps after the last request finished with blocks in flight
    account: BlockAccount = field(default_factory=lambda: BlockAccount(10, 9, 0, ()))
    steps: int = 0
    finished_loads: list[set[str]] = field(default_factory=list)

    def status(self) -> Status:
        return self.script[min(self.steps, len(self.script) - 1)]

    def geometry(self) -> Geometry:
        return Geometry(0, 4, (), 0)

    def add_request(self, spec: RequestSpec) -> None:
        pass

    def step(
        self, finished_loads: set[str], failed_loads: frozenset[str] = frozenset()
    ) -> StepOutcome:
        self.finished_loads.append(set(finished_loads))
        self.steps += 1
        scheduled = {"a": 1} if self.status() in self.scheduled_while else {}
        return StepOutcome(scheduled, 9)

    def abort(self, request_ids: list[str]) -> None:
        pass

    def accounting(self) -> BlockAccount:
        return self.account

    def connector_busy(self) -> bool:
        return False

    def settled(self) -> bool:
        finished_at = self.script.index(FINISHED)
        return self.steps >= finished_at + self.unsettled_steps

    def state(self) -> SchedulerState:
        done = self.status() == FINISHED or (self.status() == WAITING and self.steps > 0)
        return SchedulerState((RequestState("a", self.status(), 8, done, 0),), 9)

    def reservation(self) -> int:
        return 3

    def install_reservation(
        self,
        admission_margin: int,
        per_request_margin: int,
        spec_tokens_through_coordinator: bool,
        admission_margin_for: Callable[[int], int] | None = None,
        admission_need_per_group: bool = False,
    ) -> None:
        pass


def run(handle: ScriptedHandle, **options: object) -> tuple[str, Playback]:
    playback = Playback(handle, CASE, **options)  # type: ignore[arg-type]
    stopped, _ = play(playback, list(CASE.events))
    return stopped, playback


def test_a_state_unchanged_and_idle_over_the_stuck_window_is_stuck() -> None:
    # Loaded (reported done) but never scheduled: the same snapshot every step.
    stopped, playback = run(ScriptedHandle([LOADING, WAITING]))
    assert stopped == "stuck"
    # The first step changes the state; then STUCK_AFTER more steps of the same one.
    assert len(playback.records) == 1 + STUCK_AFTER
    assert playback.reserved == 3  # read once, when the run stopped


def test_a_load_still_to_deliver_is_not_stuck() -> None:
    # Loading for five steps, idle: the load completes a step after admission, so the
    # completion is always either delivered or due, and the run goes on until it is.
    handle = ScriptedHandle([LOADING] * 5 + [RUNNING, FINISHED])
    stopped, _ = run(handle)
    assert stopped == "finished"
    assert {"a"} in handle.finished_loads  # the worker reported the load


def test_finishing_settles_without_recording_and_checks_every_block() -> None:
    handle = ScriptedHandle([RUNNING, RUNNING, FINISHED], unsettled_steps=2)
    stopped, playback = run(handle)
    assert stopped == "finished"
    assert len(playback.records) == 2  # the settling steps are not the request's
    assert handle.steps == 2 + 2
    assert playback.leak == ""


def test_settling_is_bounded() -> None:
    handle = ScriptedHandle([RUNNING, FINISHED], unsettled_steps=100)
    run(handle)
    assert handle.steps == 1 + SETTLE_STEPS


def test_an_unbalanced_pool_is_a_leak_naming_the_step() -> None:
    leaking = BlockAccount(pool=10, free=7, held=1, holders=("a",))
    _, playback = run(ScriptedHandle([RUNNING, FINISHED], account=leaking))
    assert playback.leak == "after step 1 (requests a): 7 free + 1 held + 1 null = 9 of 10 blocks"


def test_the_deadline_is_checked_on_the_injected_clock() -> None:
    ticks = iter(range(0, 10_000, 100))  # read at 0 (the deadline's start), 100, 200, ...
    with pytest.raises(
        CellTimeout, match=r"at step 2: a running \(8 tokens computed\); 9 blocks free, 3 reserved"
    ):
        deadline = next(ticks) + 150.0  # as run_cell sets it: now + limits.seconds
        run(ScriptedHandle([RUNNING] * 50), deadline=deadline, clock=lambda: float(next(ticks)))


@dataclass
class ArrivalsHandle(ScriptedHandle):
    """A scripted handle that keeps the requests handed to it."""

    added: list[str] = field(default_factory=list)

    def add_request(self, spec: RequestSpec) -> None:
        self.added.append(spec.id)


def test_a_request_due_when_the_rest_has_finished_still_arrives() -> None:
    """a finishes in one step; b arrives after one step, before the second: the run goes on
    to hand it over, where it used to end with b never sent (and the cell passed)."""
    late = CASE.model_copy(
        update={
            "requests": [
                RequestSpec(id="a", prompt=8),
                RequestSpec(id="b", prompt=8, arrive_after=1),
            ]
        }
    )
    handle = ArrivalsHandle([RUNNING, FINISHED])
    playback = Playback(handle, late)  # type: ignore[arg-type]
    play(playback, list(late.events))
    assert handle.added == ["b"]
    assert len(playback.records) >= 2
