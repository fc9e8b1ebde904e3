"""How tight a variant's reservation is, from a cell's runs (pure, no vLLM).

Over-reservation is the smallest pool from which every swept size finishes, minus the fit: 0
is tight, a positive number is the blocks a variant reserves beyond need (requests that fit
refused), and a stall is under-reservation (see :func:`tightness_label`). A negative number:
sizes below the fit finish too (the fit, measured in an ample pool, exceeds the least needed).

Finishing is not all: a reservation that only delays a second load finishes everywhere. Where
a case names loads that must be in flight together (``concurrency:``), a pool from where they
fit together whose run kept one waiting is over-reservation too (:func:`serialized_pools`),
and the tightness counts the blocks by which their concurrency came late
(:func:`concurrency_delay`).
"""

from __future__ import annotations

from collections.abc import Sequence

from matrix.adapters.protocol import LOADING
from matrix.judge.runs import RunKind, RunOutcome
from matrix.outcomes import UNSUPPORTED
from matrix.run.records import RunTrace, Together


def over_reservation(outcomes: Sequence[RunOutcome], fit: int) -> int | None:
    """Blocks above the fit at which the run of finishing sizes reaching the sweep's top
    begins; None when the largest size swept does not finish. A pool whose tier could not be
    filled did not run the case, so it is not held against the reservation: unfilled pools
    just below that run may begin it, down to the fit (none below it finished either)."""
    start: int | None = None
    unfilled_from: int | None = None  # the unfilled pools just below this one begin here
    for outcome in sorted(outcomes, key=lambda o: o.pool):
        if outcome.kind == "tier_unfilled":
            if unfilled_from is None:
                unfilled_from = outcome.pool
            continue
        if outcome.kind != "finished":
            start = None
        elif start is None:
            pool = outcome.pool
            start = pool if unfilled_from is None else max(unfilled_from, min(fit, pool))
        unfilled_from = None
    return None if start is None else start - fit


def tightness_label(kind: RunKind | str, over: int | None) -> str:
    """A cell's tightness in words: the over-reservation in blocks, ``stall`` (under-
    reservation), ``error``, or ``unfinished`` when no size from some point up finished."""
    if kind in ("stall", "error", "skipped"):
        return {"stall": "stall", "error": "error", "skipped": UNSUPPORTED}[kind]
    return "unfinished" if over is None else str(over)


def in_flight_together(trace: RunTrace, loads: tuple[str, ...]) -> bool:
    """Whether every one of ``loads`` was an admitted async load, not yet promoted, after
    some step of ``trace``."""
    wanted = set(loads)
    for record in trace.steps:
        loading = {r.request_id for r in record.state.requests if r.status == LOADING}
        if wanted <= loading:
            return True
    return False


def serialized_pools(traces: Sequence[RunTrace], together: Together, fit: int) -> tuple[int, ...]:
    """The pools, from the fit and ``together.from_pool`` up, whose run finished without its
    loads ever in flight together: there a reservation kept one waiting for no need."""
    start = max(fit, together.from_pool)
    return tuple(
        trace.pool
        for trace in traces
        if trace.pool >= start
        and trace.stopped == "finished"
        and not in_flight_together(trace, together.loads)
    )


def early_pools(traces: Sequence[RunTrace], together: Together, fit: int) -> tuple[int, ...]:
    """For an ``exact`` expectation, the pools from the fit up to below ``together.from_pool``
    whose loads were in flight together: there a reservation let one in where they do not fit
    together (under-reservation, whether or not the run then finished)."""
    if not together.exact:
        return ()
    return tuple(
        trace.pool
        for trace in traces
        if fit <= trace.pool < together.from_pool and in_flight_together(trace, together.loads)
    )


def concurrency_delay(traces: Sequence[RunTrace], together: Together) -> int | None:
    """Blocks above ``together.from_pool`` at which the run of pools whose loads were in flight
    together, reaching the sweep's top, begins (0: on time; negative: earlier); None when the
    largest pool swept does not have them together."""
    start: int | None = None
    for trace in sorted(traces, key=lambda t: t.pool):
        if not in_flight_together(trace, together.loads):
            start = None
        elif start is None:
            start = trace.pool
    return None if start is None else start - together.from_pool
