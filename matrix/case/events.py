"""The events a case plays, in order: steps with what must hold after them, load completions
and failures the worker reports, aborts the engine makes, and the final run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal, get_args

from pydantic import Discriminator, Field, Tag, model_validator

from matrix.case.strict import Strict
from matrix.variant_names import VariantName

# A request's state in the words of a step's ``expect`` (see StateExpectation).
StateName = Literal["waiting", "loading", "loaded", "promoted", "running", "preempted", "finished"]


class AbortEvent(Strict):
    """The engine aborts these requests (a client went away), wherever they are."""

    abort: Annotated[list[str], Field(min_length=1)]


class FailLoadEvent(Strict):
    """The worker reports these loads failed, as NIXL does: in the next step's connector
    output, through the release's failure mechanism. ``valid_blocks``: the first so many
    blocks of each arrived before the transfer failed (the worker names only the rest
    invalid), so the release keeps that prefix."""

    fail_load: Annotated[list[str], Field(min_length=1)]
    valid_blocks: Annotated[int, Field(ge=0, le=65536)] = 0


class StateExpectation(Strict):
    """Request ids that must be in each state after a step (other requests are unconstrained).

    ``waiting``: not admitted yet. ``loading``: admitted, its remote KV not yet reported loaded.
    ``loaded``: load reported complete, not yet scheduled (promotion pending or refused).
    ``promoted``: of those, moved out of ``WAITING_FOR_REMOTE_KVS`` (promoted, then refused
    its first step). ``preempted``: ran, then preempted, not running now.
    """

    waiting: list[str] = []
    loading: list[str] = []
    loaded: list[str] = []
    promoted: list[str] = []
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
    """Run ``step`` scheduler steps (schedule + model output), then check ``expect``, and
    ``scheduled``: the tokens each listed request was scheduled in the last of those steps (0:
    not scheduled), which shows a decision a state cannot (a prefix hit's length, a chunk cut
    by the step's budget)."""

    step: Annotated[int, Field(ge=1)] = 1  # bounded by limits.steps
    expect: StateExpectation | None = None
    scheduled: dict[str, Annotated[int, Field(ge=0)]] | None = None


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


class Concurrency(Strict):
    """Async loads that must be in flight together (all admitted, none promoted yet) at some
    step, at every pool from ``from_pool`` up (from the fit up, at least): a reservation that
    only delays one of them fails there. Where no pool is stated: where they fit together,
    each request's fit added up (one null block between them), a pool in which a tight
    reservation admits them all at once, plus the case's ``fit_slack``. ``from_pool`` may be
    stated per variant (``default`` for the others; stock follows the variant its release
    ships, as ``expect`` does).
    ``exact``: and never in flight together below a stated pool (from the fit up), so a
    reservation that lets one in short fails too."""

    loads: Annotated[list[str], Field(min_length=2)]
    from_pool: (
        Annotated[int, Field(ge=2)] | dict[VariantName, Annotated[int, Field(ge=2)]] | None
    ) = None
    exact: bool = False

    @model_validator(mode="after")
    def _exact_needs_a_pool(self) -> Concurrency:
        if self.exact and self.from_pool is None:
            raise ValueError(
                "exact needs from_pool: below the loads' joint fit a tight reservation may "
                "still admit them together (a reservation counts what promotion needs, not a "
                "whole sequence)"
            )
        return self

    def stated_pool(self, judged_as: str) -> int | None:
        """The pool stated for a cell held to ``judged_as``'s expectations (a mapping's entry
        for it, else its ``default``); None where none is."""
        if isinstance(self.from_pool, dict):
            return self.from_pool.get(judged_as, self.from_pool.get("default"))
        return self.from_pool


def _event_kind(value: Any) -> str | None:
    if isinstance(value, dict):
        keys = [key for key in _KIND_OF_MODEL.values() if key in value]
        return keys[0] if keys else ("step" if "expect" in value or "scheduled" in value else None)
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
    if isinstance(event, StepEvent):
        named = event.expect.ids() if event.expect is not None else set()
        return sorted(named | set(event.scheduled or ()))
    return ()
