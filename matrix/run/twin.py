"""Stock's twin: the variant its release ships, patched into a fresh scheduler at each of the
stock cell's pools. Stock runs vLLM's own reservation code; its twin the same rule counted by
the adapter through vLLM's KV cache managers, everything else vLLM's. The two must decide
alike, step for step (``matrix.judge.twin``): where they do not, vLLM's code does not do what
its release's rule says, even where every request still finishes.

A twin's run is the shipped variant's own cell's run at that pool (a fresh scheduler, the
same case): it is handed, once, to that cell when it runs next (a case's cells run one after
another), instead of running again.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from matrix.adapters.protocol import VersionAdapter
from matrix.case.expansion import Cell
from matrix.case.format import CaseFile
from matrix.run.playback import cell_clock
from matrix.run.pools import run_pool
from matrix.run.records import RunTrace
from matrix.run.variants import VARIANTS, Variant

# The twin runs of the stock cell last run, handed once to that variant's own cell of the
# same case: (the case's run key, a built-in variant, a pool) -> its run.
_handed: dict[tuple[str, str, int], RunTrace] = {}


def twin_of(cell: Cell) -> str | None:
    """The variant a stock cell's decisions must match: the one its release ships, where the
    case holds stock to it (not where ``expect.stock`` says otherwise); None for other cells."""
    if cell.variant != "stock" or cell.judged_as != cell.ships:
        return None
    return cell.ships


def forget_twin_runs() -> None:
    """Drops twin runs not yet handed on: a stock cell's start, and a process that changes
    vLLM's code under the runs (a mutant), must not read runs made before."""
    _handed.clear()


def own_run(
    adapter: VersionAdapter,
    case: CaseFile,
    key: str,
    variant: Variant | str,
    name: str,
    pool: int,
    deadline: float = math.inf,
    clock: Callable[[], float] = cell_clock,
) -> RunTrace:
    """A cell's run of ``variant`` (named ``name``) at ``pool``: the twin run a stock cell of
    the same case (its ``run_key``, ``key``) just made, where it made one of this built-in
    variant, else run now."""
    if _handed and (variant == name or variant is VARIANTS.get(name)):
        handed = _handed.pop((key, name, pool), None)
        if handed is not None:
            return handed
    return run_pool(adapter, case, variant, pool, deadline, clock)


def twin_run(
    adapter: VersionAdapter,
    case: CaseFile,
    key: str,
    twin: str,
    pool: int,
    deadline: float = math.inf,
    clock: Callable[[], float] = cell_clock,
) -> RunTrace:
    """The twin variant's run at ``pool``, kept to hand to its own cell (of the case whose
    ``run_key`` is ``key``)."""
    trace = run_pool(adapter, case, twin, pool, deadline, clock)
    _handed[(key, twin, pool)] = trace
    return trace
