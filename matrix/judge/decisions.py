"""What a cell decided, judged beside how its runs ended (pure, records only): loads the case
expects in flight together (``concurrency:``, ``tightness``) and, for a stock cell, the same
decisions as its twin, the rule its release ships (``twin``). A run that finished can still
have decided wrong: these are its failures."""

from __future__ import annotations

from dataclasses import dataclass

from matrix.judge.runs import RunKind
from matrix.judge.tightness import concurrency_delay, early_pools, serialized_pools
from matrix.judge.twin import differing_pools
from matrix.outcomes import Severity
from matrix.run.records import CellRun
from matrix.wording import pool_ranges


@dataclass(frozen=True)
class Unmet:
    """A decision gone wrong at some pools: the kind a cell fails with, how bad, in words."""

    kind: RunKind
    severity: Severity
    pools: tuple[int, ...]
    problem: str


def concurrency_late(run: CellRun) -> int | None:
    """Blocks by which the latest of the case's expected concurrencies came (None: none is
    expected, or one never came at the sweep's top)."""
    delays = [concurrency_delay(run.traces, together) for together in run.together]
    if not delays or None in delays:
        return None
    return max(d for d in delays if d is not None)


def decision_failures(run: CellRun) -> list[Unmet]:
    """Every decision of the cell's runs that went wrong, the first first."""
    unmet: list[Unmet] = []
    differing = list(differing_pools(run))
    if differing:
        pools = tuple(pool for pool, _ in differing)
        problem = (
            f"decided otherwise than its twin at pools {pool_ranges(pools)}; {differing[0][1]}"
        )
        unmet.append(Unmet("decision", "decision", pools, problem))
    for together in run.together:
        loads = " and ".join(together.loads)
        late = serialized_pools(run.traces, together, run.fit)
        if late:
            unmet.append(
                Unmet(
                    "expectation",
                    "over_reservation",
                    late,
                    f"loads {loads} never in flight together at pools {pool_ranges(late)} "
                    f"(expected from pool {together.from_pool}): a reservation kept one waiting",
                )
            )
        early = early_pools(run.traces, together, run.fit)
        if early:
            unmet.append(
                Unmet(
                    "expectation",
                    "expectation",
                    early,
                    f"loads {loads} in flight together at pools {pool_ranges(early)}, below "
                    f"pool {together.from_pool} where they fit together: a reservation let one "
                    "in short",
                )
            )
    return unmet
