"""How tight a variant's reservation is, from a cell's runs (pure, no vLLM).

Over-reservation is the smallest pool from which every swept size finishes, minus the fit: 0
is tight, a positive number is the blocks a variant reserves beyond need (requests that fit
refused), and a stall is under-reservation (see :func:`tightness_label`). A negative number:
sizes below the fit finish too (the fit, measured in an ample pool, exceeds the least needed).
"""

from __future__ import annotations

from collections.abc import Sequence

from matrix.judge.runs import RunKind, RunOutcome
from matrix.outcomes import UNSUPPORTED


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
