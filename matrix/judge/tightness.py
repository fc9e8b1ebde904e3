"""How tight a variant's reservation is, from a cell's runs (pure, no vLLM).

Over-reservation is the smallest pool from which every swept size finishes, minus the fit: 0
is tight, a positive number is the blocks a variant reserves beyond need (requests that fit
refused), and a stall is under-reservation (see :func:`tightness_label`). A negative number:
sizes below the fit finish too (the fit, measured in an ample pool, exceeds the least needed).
"""

from __future__ import annotations

from collections.abc import Sequence

from matrix.judge.runs import RunKind, RunOutcome


def over_reservation(outcomes: Sequence[RunOutcome], fit: int) -> int | None:
    """Blocks above the fit at which the run of finishing sizes reaching the sweep's top
    begins; None when the largest size swept does not finish."""
    start: int | None = None
    for outcome in sorted(outcomes, key=lambda o: o.pool):
        if outcome.kind != "finished":
            start = None
        elif start is None:
            start = outcome.pool
    return None if start is None else start - fit


def tightness_label(kind: RunKind | str, over: int | None) -> str:
    """A cell's tightness in words: the over-reservation in blocks, ``stall`` (under-
    reservation), ``error``, or ``unfinished`` when no size from some point up finished."""
    if kind in ("stall", "error", "skipped"):
        return {"stall": "stall", "error": "error", "skipped": "skip"}[kind]
    return "unfinished" if over is None else str(over)
