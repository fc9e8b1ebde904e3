"""A cell's result record: what the tables and reports show of one case x variant, from its
verdict or from why it was skipped. Records travel between pytest-xdist workers and the
controller as plain dicts (``CellResult.to_dict`` / ``CellResult.from_dict``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from matrix.case.connector import DEFAULT_CONNECTOR
from matrix.case.expansion import Cell
from matrix.judge.runs import RunKind
from matrix.judge.severity import PoolFailure
from matrix.judge.tightness import over_reservation
from matrix.judge.verdict import Verdict, expectation_met
from matrix.outcomes import UNSUPPORTED, Severity
from matrix.run.records import PoolSteps

Observed = Literal["pass", "fail", "skip"]
CellKind = Literal[RunKind, "skipped"]


@dataclass(frozen=True)
class CellResult:
    """One cell of the tables: the case, the variant, what was expected and observed."""

    case: str
    column: str | None
    variant: str
    expected: str  # "pass" or "fail"
    expected_kind: str | None  # a failure kind the case pinned, if any
    observed: Observed  # "skip": the release cannot run it; detail says why
    kind: CellKind  # "finished", the failure kind, or "skipped"
    detail: str
    source: str
    as_expected: bool  # observed matches the case's expectation (see verdict.expectation_met)
    fit: int = 0
    failing_pools: tuple[int, ...] = ()  # the pool sizes whose run failed
    case_digest: str = ""  # see expand.Case.digest
    model: str | None = None  # the described model a case runs (see model_schema)
    # Blocks reserved beyond need: the smallest pool from which every size finishes, minus
    # the fit (see matrix/judge/tightness.py); None when the largest pool swept does not finish.
    over_reservation: int | None = None
    # The smallest pool vLLM's start-up sizing gives an engine serving these requests (None:
    # it cannot be computed, startable_reason says why), each unfinished pool with how bad it
    # is, and the worst (see matrix/judge/severity.py).
    startable: int | None = None
    startable_reason: str = ""
    failures: tuple[PoolFailure, ...] = ()
    severity: Severity | None = None
    swept: tuple[int, ...] = ()  # the smallest and the largest pool swept (every size between)
    # A failing cell's runs at its first failing pool and at its fit, block by block, for its
    # picture (matrix/run/steps.py); empty for every other cell.
    steps: tuple[PoolSteps, ...] = ()
    # What each pool whose run finished cost: steps, preemptions, each load's admission and
    # wait, a line a pool (matrix/judge/cost.py); a variant's against stock's in the reports.
    costs: tuple[str, ...] = ()
    # The connector a cell's loads went through, where it is not the default (NIXL).
    connector: str | None = None
    workload: bool = False  # a workload case's cell (matrix/case/workload.py): its costs tabled
    # Skipped for a feature of vLLM the case asks for and the release does not have (its age:
    # a scheduler setting, a Mamba mode), not for a fault of the case or the matrix.
    release_lacks: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data (a report's cell, an xdist report property)."""
        data = {f: getattr(self, f) for f in self.__dataclass_fields__ if f != "steps"}
        data["failures"] = [asdict(f) for f in self.failures]
        if self.steps:
            data["steps"] = [s.to_dict() for s in self.steps]
        # Cells of hand-written layouts (of NIXL, of written-out requests) keep the shape
        # reports had before models (connectors, workloads).
        unset = {"model": None, "connector": None, "workload": False, "release_lacks": False}
        return {k: v for k, v in data.items() if k not in unset or v != unset[k]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CellResult:
        """The record a :meth:`to_dict` wrote (reports written before a field existed get its
        default)."""
        return cls(
            **{
                **data,
                "failing_pools": tuple(data.get("failing_pools", ())),
                "failures": tuple(PoolFailure(**f) for f in data.get("failures", ())),
                "swept": tuple(data.get("swept", ())),
                "steps": tuple(PoolSteps.from_dict(s) for s in data.get("steps", ())),
                "costs": tuple(data.get("costs", ())),
            }
        )


def result_of(cell: Cell, verdict: Verdict, steps: tuple[PoolSteps, ...] = ()) -> CellResult:
    """A cell's record from its verdict (and, for a failing cell, its pictured runs); a cell
    none of whose pools could run the case (its tier never filled) is unsupported there."""
    if verdict.outcomes and all(o.kind == "tier_unfilled" for o in verdict.outcomes):
        return skipped_result(cell, f"at every pool swept, {verdict.outcomes[0].diagnosis}")
    digest = cell.case.digest
    if verdict.layout_digest:  # what ran depends on the release's derivation too
        digest = f"{digest}+{verdict.layout_digest}"
    return _record(
        cell,
        observed=verdict.observed,
        kind=verdict.kind,
        detail=verdict.detail,
        as_expected=expectation_met(cell.expected, verdict),
        fit=verdict.fit,
        failing_pools=verdict.failing_pools,
        case_digest=digest,
        over_reservation=_over(verdict),
        startable=verdict.startable,
        startable_reason=verdict.startable_reason,
        failures=verdict.failures,
        severity=verdict.severity,
        swept=_swept(verdict),
        steps=steps,
        costs=verdict.costs,
    )


def _over(verdict: Verdict) -> int | None:
    """The blocks a cell reserved beyond need: the pools refused from the fit up, or the
    loads it kept from being in flight together where they fit (the larger)."""
    over = over_reservation(verdict.outcomes, verdict.fit)
    late = verdict.concurrency_delay
    if over is None or late is None:
        return over
    return max(over, late)


def _swept(verdict: Verdict) -> tuple[int, ...]:
    pools = [o.pool for o in verdict.outcomes]
    return (min(pools), max(pools)) if pools else ()


def skipped_result(cell: Cell, reason: str, release_lacks: bool = False) -> CellResult:
    """A cell's record when the installed release cannot run it, with the reason; with
    ``release_lacks``, the reason is a feature of vLLM the case asks for and the release does
    not have yet."""
    return _record(
        cell,
        observed="skip",
        kind="skipped",
        detail=reason,
        as_expected=True,
        case_digest=cell.case.digest,
        release_lacks=release_lacks,
    )


def errored_result(cell: Cell, error: BaseException) -> CellResult:
    """A cell's record when running or judging it raised where no run could catch it: a row
    that says what raised, in one line, never a cell missing from the tables."""
    first_line = (str(error).strip().splitlines() or [""])[0]
    return _record(
        cell,
        observed="fail",
        kind="error",
        detail=f"the cell raised {type(error).__name__}: {first_line}".rstrip(": "),
        as_expected=False,
        case_digest=cell.case.digest,
        severity="error",
    )


def _record(cell: Cell, **outcome: Any) -> CellResult:
    pinned_kind = cell.expected not in ("pass", "fail")
    definition = cell.case.definition
    return CellResult(
        case=cell.case.case_id,
        column=cell.case.column,
        variant=cell.variant,
        expected="fail" if pinned_kind else cell.expected,
        expected_kind=cell.expected if pinned_kind else None,
        source=f"{cell.case.source.name}:{cell.line}",
        model=definition.model if definition.described is not None else None,
        workload=definition.workload is not None,
        connector=None if definition.connector == DEFAULT_CONNECTOR else definition.connector,
        **outcome,
    )


def _wholly_skipped(cells: list[CellResult]) -> dict[str, list[CellResult]]:
    """Each case, and each model run by several cases, whose every cell was skipped."""
    groups: dict[str, list[CellResult]] = {}
    for cell in cells:
        groups.setdefault(f"case {cell.case.split('[', 1)[0]}", []).append(cell)
    models: dict[str, set[str]] = {}
    for cell in cells:
        if cell.model is not None:
            models.setdefault(cell.model, set()).add(cell.case.split("[", 1)[0])
    for model, cases in models.items():
        if len(cases) > 1:
            groups[f"model {model}"] = [cell for cell in cells if cell.model == model]
    return {
        name: group
        for name, group in groups.items()
        if all(cell.observed == "skip" for cell in group)
    }


def _line(name: str, group: list[CellResult]) -> str:
    return f"every cell of {name} is {UNSUPPORTED} ({len(group)}): {group[0].detail}"


def wholly_skipped(cells: list[CellResult]) -> list[str]:
    """A line for each case, and each model run by several cases, whose every cell was
    skipped, with the reason: a run that skips all of one tested nothing of it, which a green
    run must not hide (a model file the installed vLLM cannot derive, a case it cannot run)."""
    return [_line(name, group) for name, group in _wholly_skipped(cells).items()]


def failing_skips(cells: list[CellResult], filtered: bool) -> list[str]:
    """The lines of :func:`wholly_skipped` that fail the run: those of a case or model the
    release could have run (a case asking for what an older release lacks, such as 0.34's
    in-flight load gate on 0.33, is what that release is, said but not failed); in a run a
    filter narrowed (``--connector``, ``-k``, ``-m``), whose user chose its cells, only when
    none of them ran (a case known to be unsupported for that filter, every cell of it skipped
    with its reason, is what the filter asked for)."""
    if filtered and any(cell.observed != "skip" for cell in cells):
        return []
    if not any(cell.observed != "skip" for cell in cells):
        return wholly_skipped(cells)  # nothing ran at all: whatever the reasons, a failure
    return [
        _line(name, group)
        for name, group in _wholly_skipped(cells).items()
        if not all(cell.release_lacks for cell in group)
    ]
