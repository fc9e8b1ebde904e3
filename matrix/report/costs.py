"""What each variant costs against stock, from the cells' recorded costs
(``CellResult.costs``, matrix/judge/cost.py): at the pools where both finished, the cells where
it took more steps or fewer, preempted more, or kept its loads waiting longer, and by how much.
A variant that removes a stall and costs throughput says so here. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from matrix.judge.cost import Difference, PoolCost, difference
from matrix.judge.result import CellResult
from matrix.judge.verdict import pool_ranges
from matrix.report.tables import Table, sort_cells, variants_of

STOCK = "stock"


def differences(cells: Sequence[CellResult]) -> list[tuple[CellResult, Difference]]:
    """Each non-stock cell with its difference from the same case's stock cell (cells whose
    case has no stock cell with costs, or which share no finished pool with it, are left out)."""
    stock = {c.case: c for c in cells if c.variant == STOCK and c.costs}
    found = []
    for cell in sort_cells(cells):
        reference = stock.get(cell.case)
        if cell.variant == STOCK or reference is None or not cell.costs:
            continue
        diff = difference(cell.costs, reference.costs)
        if diff.compared:
            found.append((cell, diff))
    return found


def _counted(pairs: Sequence[tuple[CellResult, Difference]], pools: str, extreme: str) -> str:
    having = [(cell, diff) for cell, diff in pairs if getattr(diff, pools)]
    if not having:
        return "0"
    most = max((abs(getattr(diff, extreme)) for _, diff in having), default=0)
    sign = "-" if extreme == "least_steps" else "+"
    return f"{len(having)} (up to {sign}{most})" if most else str(len(having))


def cost_table(cells: Sequence[CellResult]) -> Table:
    """A row a variant: the cells compared with stock, and how many took more steps (up to
    how many more, at one pool), fewer, preempted more, or kept their loads waiting longer."""
    pairs = differences(cells)
    header = [
        "variant",
        "cells compared",
        "slower (steps)",
        "faster (steps)",
        "preempts more",
        "loads wait longer",
    ]
    rows = []
    for variant in variants_of(cells):
        mine = [(c, d) for c, d in pairs if c.variant == variant]
        if variant == STOCK or not mine:
            continue
        rows.append(
            [
                variant,
                str(len(mine)),
                _counted(mine, "slower", "most_steps"),
                _counted(mine, "faster", "least_steps"),
                _counted(mine, "more_preemptions", "most_preemptions"),
                str(sum(1 for _, d in mine if d.longer_waits)),
            ]
        )
    return header, rows


def cost_details(cells: Sequence[CellResult]) -> Table:
    """A row for each cell that cost other than stock somewhere both finished: where it was
    slower or faster, preempted more, or made its loads wait longer, with the largest change."""
    header = ["cell", "slower at", "faster at", "preempts more at", "loads wait longer at"]
    rows = []
    for cell, diff in differences(cells):
        if diff.same and not diff.longer_waits:
            continue
        rows.append(
            [
                f"{cell.case}-{cell.variant}",
                _pools(diff.slower, diff.most_steps),
                _pools(diff.faster, diff.least_steps),
                _pools(diff.more_preemptions, diff.most_preemptions),
                pool_ranges(diff.longer_waits),
            ]
        )
    return header, rows


def _pools(pools: tuple[int, ...], change: int) -> str:
    if not pools:
        return ""
    return f"{pool_ranges(pools)} ({change:+d})"


def workload_table(cells: Sequence[CellResult]) -> Table:
    """A workload case's cells (matrix/case/workload.py), a row a variant and pool: the steps to
    finish every request, the requests' mean and tail (90th percentile) completion in steps,
    the preemptions, and the steps against stock's at that pool; a pool that did not finish
    says how it ended."""
    header = ["case", "variant", "pool", "steps", "mean", "tail", "preempted", "against stock"]
    workloads = [c for c in sort_cells(cells) if c.workload]
    stock = {
        (c.case, cost.pool): cost
        for c in workloads
        if c.variant == STOCK
        for cost in map(PoolCost.from_text, c.costs)
    }
    rows = []
    for cell in workloads:
        costs = {cost.pool: cost for cost in map(PoolCost.from_text, cell.costs)}
        failed = {f.pool: f"{f.kind}: {f.severity}" for f in cell.failures}
        for pool in range(cell.swept[0], cell.swept[-1] + 1) if cell.swept else ():
            cost = costs.get(pool)
            if cost is None:
                rows.append([cell.case, cell.variant, str(pool), failed.get(pool, "unfinished")])
                rows[-1] += [""] * (len(header) - len(rows[-1]))
                continue
            reference = stock.get((cell.case, pool))
            against = ""
            if reference is not None and cell.variant != STOCK:
                against = f"{cost.steps - reference.steps:+d} steps"
            elif reference is None and cell.variant != STOCK:
                against = "stock did not finish"
            rows.append(
                [
                    cell.case,
                    cell.variant,
                    str(pool),
                    str(cost.steps),
                    f"{cost.mean_completion:.1f}",
                    str(cost.tail_completion),
                    str(cost.preemptions),
                    against,
                ]
            )
    return header, rows
