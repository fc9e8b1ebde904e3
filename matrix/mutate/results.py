"""The kill matrix as records: every mutant, how each suite ended it, the scores per function,
and each suite's branch coverage of the surface. Pure: what the report and JSON show comes
from here, and a JSON report read back gives the same records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

SUITES = ("matrix", "upstream")
# How a mutant ended against one suite.
KILLED, SURVIVED, UNDECIDED, NOT_COVERED, ERROR = (
    "killed",
    "survived",
    "undecided",
    "not-covered",
    "error",
)


@dataclass(frozen=True)
class Ending:
    """How one suite ended one mutant: its status and, when killed, the item that failed
    and how (``failed``, ``hang``, ``crash``)."""

    status: str
    killer: str = ""
    how: str = ""
    items_run: int = 0
    cpu: float = 0.0
    detail: str = ""


@dataclass(frozen=True)
class MutantRow:
    """A mutant, its equivalence reason if it has one, and each suite's ending."""

    id: str
    function: str
    diff: str
    equivalent: str = ""  # the reviewed reason; empty for a mutant that counts
    endings: Mapping[str, Ending] = field(default_factory=dict)
    gap: str = ""  # the behaviour no case checks yet, when triaged as a survivor

    def killed_by(self, suite: str) -> bool:
        """Whether ``suite`` killed it."""
        ending = self.endings.get(suite)
        return ending is not None and ending.status == KILLED


@dataclass(frozen=True)
class Score:
    """One function's (or the whole surface's) counts."""

    generated: int = 0
    equivalent: int = 0
    matrix: int = 0  # killed by the matrix
    upstream: int = 0  # killed by vLLM's tests
    both: int = 0
    neither: int = 0
    undecided: int = 0  # by a suite that killed it not: undecided in one of them

    def percent(self, suite: str) -> str:
        """The suite's kills as a share of the mutants that count."""
        counted = self.generated - self.equivalent
        killed = self.matrix if suite == "matrix" else self.upstream
        return f"{100 * killed / counted:.0f}%" if counted else "-"


def score(rows: list[MutantRow], suites: tuple[str, ...]) -> Score:
    """The counts over ``rows`` (the mutants claimed equivalent count apart)."""
    counted = [r for r in rows if not r.equivalent]
    matrix = {r.id for r in counted if r.killed_by("matrix")}
    upstream = {r.id for r in counted if r.killed_by("upstream")}
    undecided = sum(
        1
        for r in counted
        if r.id not in matrix | upstream
        and any(e.status == UNDECIDED for s, e in r.endings.items() if s in suites)
    )
    neither = sum(1 for r in counted if r.id not in matrix | upstream)
    return Score(
        len(rows),
        len(rows) - len(counted),
        len(matrix),
        len(upstream),
        len(matrix & upstream),
        neither,
        undecided,
    )


def by_function(rows: list[MutantRow]) -> dict[str, list[MutantRow]]:
    """The rows grouped per function, in the surface's order (first appearance)."""
    grouped: dict[str, list[MutantRow]] = {}
    for row in rows:
        grouped.setdefault(row.function, []).append(row)
    return grouped


@dataclass(frozen=True)
class BranchCoverage:
    """One function's branches (arcs out of lines with more than one exit) and which of
    them each suite reached, as ``line->line`` strings (a negative target: the exit)."""

    function: str
    branches: tuple[str, ...]
    reached: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def only(self, suite: str, other: str) -> tuple[str, ...]:
        """The branches ``suite`` reached and ``other`` did not."""
        theirs = set(self.reached.get(other, ()))
        return tuple(b for b in self.reached.get(suite, ()) if b not in theirs)


@dataclass(frozen=True)
class SuiteInfo:
    """What one suite's run was: its items, those that fail under stock, its CPU and wall
    time, and the CPU of its baseline (the run under coverage)."""

    items: int
    failing: tuple[str, ...]
    cpu: float
    wall: float
    baseline_cpu: float


@dataclass(frozen=True)
class MutationReport:
    """Everything ``python -m matrix mutate`` reports."""

    vllm: str
    rows: tuple[MutantRow, ...]
    suites: Mapping[str, SuiteInfo]
    coverage: tuple[BranchCoverage, ...] = ()
    missing: tuple[str, ...] = ()  # surface targets the release lacks
    shard: str = ""  # "K/N" for a shard's report

    def to_json(self) -> dict[str, Any]:
        """As the JSON report holds it."""
        return {
            "vllm": self.vllm,
            "shard": self.shard,
            "missing": list(self.missing),
            "suites": {name: asdict(info) for name, info in self.suites.items()},
            "mutants": [
                {
                    "id": r.id,
                    "function": r.function,
                    "diff": r.diff,
                    "equivalent": r.equivalent,
                    "endings": {s: asdict(e) for s, e in r.endings.items()},
                    "gap": r.gap,
                }
                for r in self.rows
            ],
            "coverage": [asdict(c) for c in self.coverage],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MutationReport:
        """Read back from :meth:`to_json`."""
        rows = tuple(
            MutantRow(
                m["id"],
                m["function"],
                m["diff"],
                m["equivalent"],
                {s: Ending(**e) for s, e in m["endings"].items()},
                m["gap"],
            )
            for m in data["mutants"]
        )
        suites = {
            name: SuiteInfo(**{**info, "failing": tuple(info["failing"])})
            for name, info in data["suites"].items()
        }
        coverage = tuple(
            BranchCoverage(
                c["function"],
                tuple(c["branches"]),
                {s: tuple(b) for s, b in c["reached"].items()},
            )
            for c in data["coverage"]
        )
        return cls(data["vllm"], rows, suites, coverage, tuple(data["missing"]), data["shard"])
