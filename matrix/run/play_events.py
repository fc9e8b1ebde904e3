"""A case's events played in order on a :class:`~matrix.run.playback.Playback`: loads asked to
complete or fail, aborts, steps and their expectations, and the run that ends every case.
"""

from __future__ import annotations

from matrix.adapters.protocol import SchedulerState
from matrix.case.events import (
    AbortEvent,
    CompleteLoadEvent,
    Event,
    FailLoadEvent,
    RunBound,
    RunEvent,
    StateExpectation,
    StepEvent,
)
from matrix.run.playback import ACCEPTED, Playback, state_name
from matrix.run.records import StopReason


def unmet_expectation(expect: StateExpectation, state: SchedulerState, step: int) -> str | None:
    """What in ``state`` differs from a step's ``expect``, in words, or None."""
    by_id = {r.request_id: r for r in state.requests}
    for wanted, request_ids in expect.by_state().items():
        for request_id in request_ids:
            if request_id not in by_id:  # arrive_after: not handed to the scheduler yet
                return f"after step {step}: {request_id} has not arrived yet, expected {wanted}"
            actual = state_name(by_id[request_id])
            if actual != wanted and actual not in ACCEPTED.get(wanted, ()):
                return f"after step {step}: {request_id} is {actual}, expected {wanted}"
    return None


def unmet_scheduling(wanted: dict[str, int], playback: Playback, step: int) -> str | None:
    """Which request was scheduled another number of tokens than a step's ``scheduled`` says
    in the last step, in words, or None."""
    scheduled = dict(playback.records[-1].scheduled) if playback.records else {}
    for request_id, tokens in wanted.items():
        actual = scheduled.get(request_id, 0)
        if actual != tokens:
            return f"at step {step}: {request_id} scheduled {actual} tokens, expected {tokens}"
    return None


def play(playback: Playback, events: list[Event]) -> tuple[StopReason, str]:
    """Plays the events; returns how the run stopped and the first unmet expectation, if any.

    An unmet expectation does not stop the run: playing on shows whether the scheduler
    then stalls, which matters more than the expectation."""
    unmet = ""
    for event in events:
        if isinstance(event, CompleteLoadEvent):
            playback.completions_requested |= set(event.complete_load)
        elif isinstance(event, FailLoadEvent):
            playback.failures_requested |= set(event.fail_load)
            if event.valid_blocks:
                playback.handle.keep_arrived(event.fail_load, event.valid_blocks)
        elif isinstance(event, AbortEvent):
            playback.abort(event.abort)
        elif isinstance(event, StepEvent):
            for _ in range(event.step):
                playback.step()
            step = len(playback.records)
            if event.expect is not None and not unmet:
                unmet = unmet_expectation(event.expect, playback.state(), step) or ""
            if event.scheduled and not unmet:
                unmet = unmet_scheduling(event.scheduled, playback, step) or ""
    # The schema allows a run only as the last event; without one, the run still ends
    # with a run, so every case is judged on whether its requests finish.
    last = events[-1] if events else None
    return playback.run(last.run if isinstance(last, RunEvent) else RunBound()), unmet
