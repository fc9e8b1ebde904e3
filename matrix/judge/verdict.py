"""A cell's verdict from its runs: pass, or the kind of failure, its pool sizes and the first
diagnosis. What counts as a failure depends on the pool against the case's *fit*, the smallest
pool in which each request alone runs to completion (see :func:`acceptable`). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from matrix.frozen import fast_init
from matrix.judge.cost import run_costs
from matrix.judge.decisions import concurrency_late, decision_failures
from matrix.judge.runs import RunKind, RunOutcome, classify_run
from matrix.judge.severity import PoolFailure, pool_failures, worst
from matrix.outcomes import Severity
from matrix.run.records import CellRun
from matrix.wording import pool_ranges as pool_ranges  # where the reports read it


@fast_init
@dataclass(frozen=True)
class Verdict:
    """A cell judged: pass or fail, the failure kind, the detail in words, and the runs."""

    observed: Literal["pass", "fail"]
    kind: RunKind
    detail: str
    fit: int  # the smallest pool in which every request, alone, runs to completion
    outcomes: tuple[RunOutcome, ...]
    failing_pools: tuple[int, ...] = ()  # the pool sizes whose outcome is not acceptable
    # Identifies the layout a described model ran with on this release (see CellRun).
    layout_digest: str = ""
    # How bad each unfinished pool is (matrix/judge/severity.py), and the worst; judged
    # against the fit and the smallest pool vLLM's start-up sizing gives (None: unknown).
    startable: int | None = None
    startable_reason: str = ""
    failures: tuple[PoolFailure, ...] = ()
    severity: Severity | None = None
    # What each pool whose run finished cost (matrix/judge/cost.py), a line a pool.
    costs: tuple[str, ...] = ()
    # Blocks by which the loads a case expects in flight together came late (the largest of its
    # ``concurrency:``; matrix/judge/tightness.py); None: none expected, or never together.
    concurrency_delay: int | None = None


def judge_run(run: CellRun) -> Verdict:
    """The verdict of a cell's runs (see :func:`judge_cell`); a case that could not run is an
    ``error``, a cell past its deadline a ``timeout`` naming where it was."""
    outcomes = tuple(map(classify_run, run.traces))
    startable, reason = run.startable.blocks, run.startable.reason
    served = {t.pool: classify_run(t).kind for t in run.served_traces}
    failures = pool_failures(outcomes, run.fit, startable, run.served_fit, served)
    if run.error:
        verdict = Verdict("fail", "error", run.error, run.fit, outcomes)
        return replace(verdict, startable=startable, startable_reason=reason, severity="error")
    if run.timeout:
        pools = (run.timeout_pool,) if run.timeout_pool else ()
        verdict = Verdict("fail", "timeout", run.timeout, run.fit, outcomes, pools)
        severity: Severity | None = "timeout"
    else:
        verdict = judge_cell(outcomes, run.fit, run.fit_slack)
        verdict, failures = _with_decisions(verdict, run, failures)
        severity = worst(failures)
    return replace(
        verdict,
        layout_digest=run.layout_digest,
        startable=startable,
        startable_reason=reason,
        failures=failures,
        severity=severity,
        costs=run_costs(run.traces),
    )


def _with_decisions(
    verdict: Verdict, run: CellRun, failures: tuple[PoolFailure, ...]
) -> tuple[Verdict, tuple[PoolFailure, ...]]:
    """The verdict and pool failures with the cell's decisions judged (``decisions``): a run
    that finished can still have decided wrong, and fails the cell at those pools."""
    verdict = replace(verdict, concurrency_delay=concurrency_late(run))
    unmet = decision_failures(run)
    if not unmet:
        return verdict, failures
    failing = {f.pool for f in failures}
    for found in unmet:
        failures += tuple(
            PoolFailure(p, found.kind, found.severity) for p in found.pools if p not in failing
        )
        failing |= set(found.pools)
    failures = tuple(sorted(failures, key=lambda f: f.pool))
    problem = "; ".join(found.problem for found in unmet)
    if verdict.observed == "fail":
        return replace(verdict, detail=f"{verdict.detail}; also {problem}"), failures
    first = unmet[0]
    pools = tuple(sorted({p for found in unmet for p in found.pools}))
    failed = replace(verdict, observed="fail", kind=first.kind, detail=problem, failing_pools=pools)
    return failed, failures


def acceptable(outcome: RunOutcome, fit: int, slack: int = 0) -> bool:
    """A stall, a leak, a runner protocol violation or an error is never right. From the fit
    up, every request must finish (refusing one that fits is over-reservation, tolerated up to
    ``slack`` blocks) and every step expectation must hold; below it the pool is too small for
    some request, and what the scheduler does then is its own call. A pool whose tier could
    not be filled did not run the case, so nothing there is judged."""
    if outcome.kind in ("finished", "tier_unfilled"):
        return True
    if outcome.kind in ("stall", "leak", "protocol", "error"):
        return False
    if outcome.kind == "not_admitted":
        return outcome.pool < fit + slack
    return outcome.pool < fit


def judge_cell(outcomes: Sequence[RunOutcome], fit: int, slack: int = 0) -> Verdict:
    """A cell's verdict from its runs, one per pool size: pass unless some run is unacceptable
    (see :func:`acceptable`); a failure names its kind, pools and first diagnosis."""
    fit_text = f"fit {fit}" + (f", slack {slack}" if slack else "")
    failures = [o for o in outcomes if not acceptable(o, fit, slack)]
    if not failures:
        finished = [o.pool for o in outcomes if o.kind == "finished"]
        unfilled = [o.pool for o in outcomes if o.kind == "tier_unfilled"]
        unfinished = [o.pool for o in outcomes if o.kind not in ("finished", "tier_unfilled")]
        detail = f"finished at pools {pool_ranges(finished)}" if finished else "nothing finished"
        if unfinished:
            detail += f"; unfinished below the fit ({fit_text}) at {pool_ranges(unfinished)}"
        if unfilled:
            detail += (
                f"; not run at {pool_ranges(unfilled)}, the tier not filled (the request that "
                "stores what the case says it holds cannot run to its end there)"
            )
        if outcomes and max(o.pool for o in outcomes) < fit:
            detail += "; no pool reaches the fit, so only stalls and errors were checked"
        return Verdict("pass", "finished", detail, fit, tuple(outcomes))
    first = failures[0]
    same_kind = [o.pool for o in failures if o.kind == first.kind]
    other_kinds = sorted({o.kind for o in failures} - {first.kind})
    detail = (
        f"{first.kind} at pools {pool_ranges(same_kind)} ({fit_text}); "
        f"pool {first.pool}: {first.diagnosis}"
    )
    if other_kinds:
        detail += f"; also {', '.join(other_kinds)}"
    failing_pools = tuple(o.pool for o in failures)
    return Verdict("fail", first.kind, detail, fit, tuple(outcomes), failing_pools)


def drawn_pools(verdict: Verdict) -> tuple[int, ...]:
    """The pools a failing cell's picture draws: its first failing pool and its fit (where
    the cell swept it); none for a passing cell, or one whose runs cannot be run again (it
    could not run, or ran past its time)."""
    if verdict.observed != "fail" or verdict.kind == "timeout" or not verdict.failing_pools:
        return ()
    swept = {o.pool for o in verdict.outcomes}
    first = verdict.failing_pools[0]
    return (first,) if first == verdict.fit or verdict.fit not in swept else (first, verdict.fit)


def expectation_met(expected: str, verdict: Verdict) -> bool:
    """``expected`` is pass, fail, or a failure kind that the cell must fail with."""
    if expected in ("pass", "fail"):
        return verdict.observed == expected
    return verdict.observed == "fail" and verdict.kind == expected
