"""Runs a cell against the installed vLLM's real scheduler.

For each pool size: build a fresh scheduler through the version adapter, apply the variant to
that instance, add the requests, play the case's events (``playback``) with a step bound, and
keep a snapshot per step. The fit is measured here; the verdict module turns the snapshots
into the cell's result.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace
from time import monotonic as clock

from matrix.adapters import VersionAdapter
from matrix.events import RunBound, RunEvent
from matrix.expand import CellSpec
from matrix.model_schema import FitSweep
from matrix.playback import CellTimeout, Scenario, play
from matrix.schema import CaseFile
from matrix.variants import VARIANTS, Variant
from matrix.verdict import (
    CellVerdict,
    RunOutcome,
    RunTrace,
    StepRecord,
    classify_run,
    judge_cell,
)


def run_scenario(
    adapter: VersionAdapter,
    case: CaseFile,
    variant: Variant | str,
    pool: int,
    deadline: float = math.inf,
) -> RunTrace:
    """One run at one pool size; ``variant`` is a built-in's name or any :class:`Variant`."""
    rule = VARIANTS[variant] if isinstance(variant, str) else variant
    scenario: Scenario | None = None
    try:
        handle = adapter.build(case, pool)
        rule.apply(handle)
        for request in case.requests:
            handle.add_request(request)
        scenario = Scenario(handle, case, deadline=deadline)
        stopped, unmet = play(scenario, list(case.events))
        return RunTrace(
            pool, tuple(scenario.records), stopped, unmet_expectation=unmet, leak=scenario.leak
        )
    except CellTimeout:
        raise
    except Exception as error:  # vLLM raising is an outcome to report, not a crash
        records = tuple(scenario.records) if scenario else ()
        leak = scenario.leak if scenario else ""
        return RunTrace(pool, records, "error", f"{type(error).__name__}: {error}", leak=leak)


def ample_pool(case: CaseFile) -> int:
    sizes = [g.tokens_per_block(case.max_model_len) for g in case.groups]
    # A request never holds more than max_model_len tokens per group; the slack covers Mamba's
    # speculative state blocks (at most one per speculative token) and the null block.
    return sum(math.ceil(case.max_model_len / size) + 32 for size in sizes)


# Keyed by the case's content: every variant of a case shares one measurement.
_fit_cache: dict[str, int] = {}


def measure_fit(adapter: VersionAdapter, case: CaseFile, deadline: float = math.inf) -> int:
    """The smallest pool in which each request, alone, runs to completion: its peak usage.

    Measured on the stock scheduler with an ample pool, where admission is never refused, so it
    depends on what requests allocate, not on any reservation rule.
    """
    cache_key = case.model_dump_json(
        include={"model", "layout", "max_model_len", "groups", "speculative", "engine", "requests"}
    )
    if cache_key in _fit_cache:
        return _fit_cache[cache_key]
    # Once per case content, like the fit (a failure is never cached, so it fails every cell).
    check_lookahead(adapter, case)
    ample = ample_pool(case)
    fit = 0
    for request in case.requests:
        alone = case.model_copy(
            update={"requests": [request], "events": [RunEvent(run=RunBound())]}
        )
        trace = run_scenario(adapter, alone, "stock", ample, deadline)
        if trace.stopped != "finished":
            raise RuntimeError(
                f"request {request.id} does not finish alone in {ample} blocks: "
                f"{classify_run(trace).diagnosis}"
            )
        fit = max(fit, ample - _least_free(trace.steps))
    _fit_cache[cache_key] = fit
    return fit


def forget_fits() -> None:
    """Drops measured fits (for benchmarks that time a cold cell)."""
    _fit_cache.clear()


def _least_free(records: tuple[StepRecord, ...]) -> int:
    return min(min(r.free_blocks_while_running, r.state.free_blocks) for r in records)


def pool_sizes(case: CaseFile, fit: int | None = None) -> list[int]:
    """The pools a case runs at; a sweep relative to the fit needs the fit."""
    if isinstance(case.pool, int):
        return [case.pool]
    if isinstance(case.pool, FitSweep):
        if fit is None:
            raise ValueError("a pool sweep relative to the fit needs the fit")
        return list(range(max(2, fit - case.pool.below), fit + case.pool.above + 1))
    return list(range(case.pool.start, case.pool.stop + 1))


def run_cell(
    adapter: VersionAdapter, cell: CellSpec, variant: Variant | None = None
) -> CellVerdict:
    """Runs one cell at every pool size of its case and judges it against the case's fit.
    ``variant`` is the cell's variant when it is not a built-in (a user's, loaded by the run).
    """
    # One deadline for the whole cell: a case that somehow runs for minutes fails saying where
    # it was, and the session goes on with the next cell.
    deadline = clock() + cell.case.spec.limit("seconds")
    try:
        case = adapter.resolve(cell.case.spec)
        fit = measure_fit(adapter, case, deadline)
    except CellTimeout as timeout:
        return _timed_out(cell, "measuring the fit", timeout, 0, [])
    except Exception as error:  # a case vLLM cannot run is a failing cell, not a crash
        return CellVerdict("fail", "error", f"{type(error).__name__}: {error}", 0, ())
    outcomes: list[RunOutcome] = []
    for pool in pool_sizes(case, fit):
        try:
            trace = run_scenario(adapter, case, variant or cell.variant, pool, deadline)
        except CellTimeout as timeout:
            return _timed_out(cell, f"pool {pool}", timeout, fit, outcomes, pool)
        outcomes.append(classify_run(trace))
    verdict = judge_cell(outcomes, fit, case.fit_slack)
    if case.described is None:
        return verdict
    groups = case.model_dump_json(include={"groups", "requests"})
    return replace(verdict, layout_digest=hashlib.sha256(groups.encode()).hexdigest()[:12])


def _timed_out(
    cell: CellSpec,
    where: str,
    timeout: CellTimeout,
    fit: int,
    outcomes: list[RunOutcome],
    pool: int | None = None,
) -> CellVerdict:
    seconds = cell.case.spec.limit("seconds")
    detail = f"{cell.test_id} ran past {seconds} s (limits.seconds), {where}, {timeout}"
    return CellVerdict("fail", "timeout", detail, fit, tuple(outcomes), (pool,) if pool else ())


def check_lookahead(adapter: VersionAdapter, case: CaseFile) -> None:
    """A case that states a lookahead must get it from vLLM's own rule for the method."""
    if case.speculative is None or case.speculative.lookahead is None:
        return
    derived = adapter.build(case, ample_pool(case)).geometry().num_lookahead_tokens
    if derived != case.speculative.lookahead:
        raise ValueError(
            f"speculative.lookahead is {case.speculative.lookahead} but vLLM "
            f"derives {derived} for method {case.speculative.method}"
        )
