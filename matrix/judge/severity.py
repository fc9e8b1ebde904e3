"""How bad each failing pool of a cell is, from its runs, its fit and the smallest pool vLLM's
start-up sizing gives an engine serving its requests (``startable``). Pure.

From worst to mildest:

- ``deadlock``: stall, stuck, step bound or preempted-never-resumed at a pool of at least the
  fit and ``startable`` (the fit alone when ``startable`` is unknown): a pool an engine has,
  every request fits it alone, and nothing can ever run again; where the pool was run again
  on the engine ``startable`` is for, it must fail there too (else ``undersized``).
- ``leak``, ``protocol``, ``error``, ``timeout``: as their kinds.
- ``sizer``: any unfinished run at a pool from ``startable`` up to below the fit on that
  engine (its ``max_model_len`` the longest request's, which caps what a request asks): vLLM
  starts an engine with that pool, yet a request it accepts can never finish in it.
- ``unpromotable``: a stall below the fit: an async load admitted that cannot be promoted with
  what is free, even with nothing else running (the admission contract the fix restores).
- ``over_reservation``: a request refused from the fit up.
- ``decision``: as its kind (a stock cell decided otherwise than the rule its release ships).
- ``decision``: as its kind (a stock cell decided otherwise than the rule its release ships).
- ``expectation``: as its kind (the run finished; a step's ``expect`` did not hold).
- ``undersized``: any other unfinished run: one no engine serving these requests shows. Either
  the pool is below ``startable`` (no such engine has it), or the run fails only on the case's
  own engine, whose longer ``max_model_len`` vLLM would not start with that pool: the engine
  sized for the requests (``startable``'s) finished it when run again, or the pool is at least
  that engine's fit (``served_fit``) while below the case's.

``observed`` keeps its contract (see ``matrix.judge.verdict.acceptable``): a severity says what
a failing pool means, it does not decide the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import get_args

from matrix.frozen import fast_init
from matrix.judge.runs import RunKind, RunOutcome
from matrix.outcomes import Severity

SEVERITY_ORDER: tuple[Severity, ...] = get_args(Severity)  # worst first
# Kinds that leave a request unable ever to run again.
NEVER_AGAIN = frozenset({"stall", "stuck", "step_bound", "preempted"})
AS_THEIR_KIND = frozenset({"leak", "protocol", "error", "timeout", "decision", "expectation"})


@fast_init
@dataclass(frozen=True)
class PoolFailure:
    """One pool whose run did not finish cleanly: its kind and how bad it is."""

    pool: int
    kind: RunKind
    severity: Severity


def severity_of(
    outcome: RunOutcome,
    fit: int,
    startable: int | None,
    served_fit: int | None = None,
    served: RunKind | None = None,
) -> Severity:
    """How bad one unfinished (or unclean) run is; see the module docstring. ``served_fit``
    is the fit on the engine ``startable`` is for, where it differs from ``fit``; ``served``
    how the same pool ended on that engine, where it was run again (run/served.py)."""
    kind, pool = outcome.kind, outcome.pool
    if kind in AS_THEIR_KIND:
        return kind  # type: ignore[return-value]  # the four kinds are severities too
    deployable = max(fit, startable) if startable is not None else fit
    if kind in NEVER_AGAIN and pool >= deployable:
        # Only at the case's longer max_model_len: no engine with this pool runs that.
        return "undersized" if served == "finished" else "deadlock"
    if startable is not None and startable <= pool < (served_fit or fit):
        return "sizer"
    if kind == "stall" and pool < fit:
        return "unpromotable"
    if kind == "not_admitted" and pool >= fit:
        return "over_reservation"
    # Below startable, or (from startable up) at least the served engine's fit while below the
    # case's: only the case's own, longer max_model_len fails here.
    return "undersized"


def pool_failures(
    outcomes: Sequence[RunOutcome],
    fit: int,
    startable: int | None,
    served_fit: int | None = None,
    served: Mapping[int, RunKind] | None = None,
) -> tuple[PoolFailure, ...]:
    """Every pool whose run did not finish cleanly, with its severity (``served``: pools run
    again on the served engine, and how they ended there)."""
    again = served or {}
    return tuple(
        PoolFailure(o.pool, o.kind, severity_of(o, fit, startable, served_fit, again.get(o.pool)))
        for o in outcomes
        if o.kind not in ("finished", "tier_unfilled")  # a pool that ran the case, unfinished
    )


def worst(failures: Sequence[PoolFailure]) -> Severity | None:
    """The worst severity among ``failures``, ignoring ``undersized`` (a pool no engine has):
    None when nothing else failed."""
    found = {f.severity for f in failures} - {"undersized"}
    return next((s for s in SEVERITY_ORDER if s in found), None)
