"""A cell's runs: its case resolved by the release (a described model's groups), the fit
measured, then one fresh scheduler per pool size with the variant installed, all within the
cell's limit of CPU time. ``matrix.judge`` turns the result into a verdict."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from matrix.adapters.protocol import Startable, VersionAdapter
from matrix.case.connector import digest_exclusions
from matrix.case.expansion import Cell
from matrix.case.format import CaseFile
from matrix.run.fit import measure_fit, together
from matrix.run.playback import CellTimeout, cell_clock
from matrix.run.pools import pool_sizes
from matrix.run.records import CellRun, RunTrace
from matrix.run.served import served_fit, served_reruns
from matrix.run.twin import forget_twin_runs, own_run, twin_of, twin_run
from matrix.run.variants import Variant


def run_cell(
    adapter: VersionAdapter,
    cell: Cell,
    variant: Variant | None = None,
    clock: Callable[[], float] = cell_clock,
) -> CellRun:
    """Runs one cell at every pool size of its case. ``variant`` is the cell's variant when
    it is not a built-in (a user's, loaded by the run)."""
    definition = cell.case.definition
    seconds = definition.limit("seconds")
    # One deadline for the whole cell: a case that somehow runs for minutes fails saying where
    # it was, and the session goes on with the next cell.
    deadline = clock() + seconds
    slack = definition.fit_slack

    def timed_out(where: str, timeout: CellTimeout) -> str:
        limit = f"{seconds} s of CPU time (limits.seconds)"
        return f"{cell.test_id} ran past {limit}, {where}, {timeout}"

    try:
        case = adapter.resolve(definition)
        fit = measure_fit(adapter, case, deadline, clock)
        startable = _startable(adapter, case)
        served = served_fit(adapter, case, fit.blocks, startable, deadline, clock)
    except CellTimeout as timeout:
        return CellRun(0, slack, (), timeout=timed_out("measuring the fit", timeout))
    except Exception as error:  # a case vLLM cannot run is a failing cell, not a crash
        return CellRun(0, slack, (), error=f"{type(error).__name__}: {error}")
    traces: list[RunTrace] = []
    twin_traces: list[RunTrace] = []
    chosen = variant or cell.variant
    try:
        pools = pool_sizes(case, fit, startable.blocks)
    except ValueError as error:  # a sweep from startable where vLLM cannot size the engine
        return CellRun(fit.blocks, slack, (), error=f"{error}: {startable.reason}")
    twin = twin_of(cell)
    if twin is not None:
        forget_twin_runs()
    key = case.run_key()  # a twin's runs are handed on by it
    for pool in pools:
        try:
            traces.append(own_run(adapter, case, key, chosen, cell.variant, pool, deadline, clock))
            if twin is not None:
                twin_traces.append(twin_run(adapter, case, key, twin, pool, deadline, clock))
        except CellTimeout as timeout:
            detail = timed_out(f"pool {pool}", timeout)
            return CellRun(
                fit.blocks,
                slack,
                tuple(traces),
                timeout=detail,
                timeout_pool=pool,
                startable=startable,
                served_fit=served,
            )
    try:
        unfinished = [t.pool for t in traces if t.stopped in ("stuck", "step_bound")]
        again = served_reruns(
            adapter, case, chosen, unfinished, fit.blocks, startable, deadline, clock
        )
    except CellTimeout as timeout:
        detail = timed_out("confirming on the served engine", timeout)
        return CellRun(fit.blocks, slack, tuple(traces), timeout=detail, startable=startable)
    digest = ""
    if case.described is not None:
        groups = case.model_dump_json(
            include={"groups", "requests"}, exclude=digest_exclusions(case)
        )
        digest = hashlib.sha256(groups.encode()).hexdigest()[:12]
    return CellRun(
        fit.blocks,
        slack,
        tuple(traces),
        startable=startable,
        served_fit=served,
        served_traces=again,
        layout_digest=digest,
        together=together(case, fit, cell.judged_as),
        twin=twin or "",
        twin_traces=tuple(twin_traces),
    )


def _startable(adapter: VersionAdapter, case: CaseFile) -> Startable:
    """The release's start-up pool for the case; a sizing vLLM cannot do is a missing figure
    (its severities then judge against the fit alone), never a failed cell."""
    try:
        return adapter.startable(case)
    except Exception as error:
        return Startable(None, f"vLLM's start-up sizing raised {type(error).__name__}: {error}")
