"""The events a case plays, in order: steps with what must hold after them, load completions
and failures the worker reports, aborts the engine makes, and the final run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal, get_args

from pydantic import Discriminator, Field, Tag

from matrix.case.strict import Strict

# A request's state in the words of a step's ``expect`` (see StateExpectation).
StateName = Literal["waiting", "loading", "loaded", "running", "preempted", "finished"]


class AbortEvent(Strict):
    """The engine aborts these requests (a client went away), wherever they are."""

    abort: Annotated[list[str], Field(min_length=1)]


class FailLoadEvent(Strict):
    """The worker reports these loads failed, as NIXL does: in the next step's connector
    output, through the release's failure mechanism."""

    fail_load: Annotated[list[str], Field(min_length=1)]


class StateExpectation(Strict):
    """Request ids that must be in each state after a step (other requests are unconstrained).

    ``waiting``: not admitted yet. ``loading``: admitted, its remote KV not yet reported loaded.
    ``loaded``: load reported complete, not yet scheduled (promotion pending or refused).
    ``preempted``: ran, then preempted, not running now.
    """

    waiting: list[str] = []
    loading: list[str] = []
    loaded: list[str] = []
    running: list[str] = []
    preempted: list[str] = []
    finished: list[str] = []

    def by_state(self) -> dict[StateName, list[str]]:
        """Each state's name and the request ids that must be in it."""
        return {state: getattr(self, state) for state in get_args(StateName)}

    def ids(self) -> set[str]:
        """Every request id this expectation names."""
        return {rid for ids in self.by_state().values() for rid in ids}


# The fields above are the states' names; a state added to one must be added to the other.
assert tuple(StateExpectation.model_fields) == get_args(StateName)


class StepEvent(Strict):
    """Run ``step`` scheduler steps (schedule + model output), then check ``expect``."""

    step: Annotated[int, Field(ge=1)] = 1  # bounded by limits.steps
    expect: StateExpectation | None = None


class CompleteLoadEvent(Strict):
    """The remote side finishes these loads; the next step's output reports them."""

    complete_load: list[str]


class RunBound(Strict):
    """How far the final run may go: at most ``max_steps`` steps."""

    max_steps: Annotated[int, Field(ge=1)] = 200  # bounded by limits.steps


class RunEvent(Strict):
    """Step until every request finished or nothing can change; remote loads complete a step
    after admission. Ends the scenario."""

    run: RunBound


# Each event's key, in the order a mapping naming several is read as one of them.
_KIND_OF_MODEL: dict[type, str] = {
    CompleteLoadEvent: "complete_load",
    AbortEvent: "abort",
    FailLoadEvent: "fail_load",
    RunEvent: "run",
    StepEvent: "step",
}


def _event_kind(value: Any) -> str | None:
    if isinstance(value, dict):
        keys = [key for key in _KIND_OF_MODEL.values() if key in value]
        return keys[0] if keys else ("step" if "expect" in value else None)
    return _KIND_OF_MODEL.get(type(value))


# Tagged by the key an event starts with, so a mistake is reported against that kind of event.
Event = Annotated[
    Annotated[StepEvent, Tag("step")]
    | Annotated[CompleteLoadEvent, Tag("complete_load")]
    | Annotated[AbortEvent, Tag("abort")]
    | Annotated[FailLoadEvent, Tag("fail_load")]
    | Annotated[RunEvent, Tag("run")],
    Discriminator(
        _event_kind,
        custom_error_type="event_kind",
        custom_error_message="an event is one of step:, complete_load:, abort:, fail_load: or run:",
    ),
]


def named_requests(event: object) -> Sequence[str]:
    """The request ids an event names (a step names those its ``expect`` lists)."""
    if isinstance(event, AbortEvent):
        return event.abort
    if isinstance(event, FailLoadEvent):
        return event.fail_load
    if isinstance(event, CompleteLoadEvent):
        return event.complete_load
    if isinstance(event, StepEvent) and event.expect is not None:
        return sorted(event.expect.ids())
    return ()
