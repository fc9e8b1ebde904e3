"""Across releases, from the per-env JSON reports alone (so the envs may run on different
machines): the cross-version table (stock on each release) and the fidelity checks, which
prove each patched variant behaves exactly like the release that shipped it.

Pure: reads report files, returns frozen records; rendering and the exit code live in
:func:`main`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from matrix.adapters import RELEASES, nearest_release, release_key, release_of
from matrix.report import (
    Cell,
    Table,
    cell_text,
    column_verdict,
    columns_of,
    render_markdown,
    render_text,
    row_label,
)


class ReportError(Exception):
    """A report file that cannot be used; the message names it."""


# The key of a report written on a vLLM from a checkout or a local wheel (its ``source``):
# it sits beside the releases, whatever version it states, and never replaces one.
DEV = "dev"


@dataclass(frozen=True)
class ReleaseReport:
    release: str  # "0.31", or DEV
    version: str  # as the report states it
    path: Path
    cells: tuple[Cell, ...]
    matrix_digest: str  # the matrix code that wrote it
    source: str = ""  # a dev build's source, described (see devsource.Source.describe)

    @property
    def label(self) -> str:
        return (
            f"vLLM {self.version} (dev: {self.source})" if self.source else f"vLLM {self.version}"
        )

    @property
    def skipped(self) -> str | None:
        """Why nothing ran, when every cell was skipped."""
        if self.cells and all(c.observed == "skip" for c in self.cells):
            return self.cells[0].detail
        return None

    def cells_of(self, variant: str) -> dict[str, Cell]:
        return {c.case: c for c in self.cells if c.variant == variant}


def load_reports(paths: Sequence[Path]) -> dict[str, ReleaseReport]:
    """Reports keyed by release, oldest first; directories contribute their vllm-*.json."""
    files = [f for p in paths for f in (sorted(p.glob("vllm-*.json")) if p.is_dir() else [p])]
    reports: dict[str, ReleaseReport] = {}
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            version = str(data["vllm_version"])
            cells = tuple(Cell.from_dict(c) for c in data["cells"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ReportError(f"{path}: not a matrix JSON report ({error})") from None
        if any("failing_pools" not in c for c in data["cells"]):
            # Without them the fidelity checks would compare defaults: refuse, not pass.
            raise ReportError(f"{path}: written by an older matrix (no failing_pools); rerun it")
        source = _source_text(data.get("source"))
        release = DEV if source else release_of(version)
        if release in reports:
            raise ReportError(
                f"{path}: a second report for {release} (first: {reports[release].path})"
            )
        digest = str(data.get("matrix_digest", ""))
        reports[release] = ReleaseReport(release, version, path, cells, digest, source)
    dev = reports.pop(DEV, None)
    ordered = dict(sorted(reports.items(), key=lambda item: release_key(item[0])))
    return {**ordered, DEV: dev} if dev else ordered


def _source_text(source: Any) -> str:
    if not isinstance(source, dict):
        return ""
    from matrix.devsource import Source

    return Source(**source).describe()


# --- fidelity ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FidelityCheck:
    variant: str
    patched_into: str
    stock_of: str

    def __str__(self) -> str:
        if self.informational:
            return f"stock {self.patched_into} against stock {self.stock_of}"
        return f"{self.variant} patched into {self.patched_into} == stock {self.stock_of}"

    @property
    def across_releases(self) -> bool:
        return self.patched_into != self.stock_of and not self.informational

    @property
    def informational(self) -> bool:
        """A dev build's stock against the release it is driven as: what the build changed,
        shown case by case, never a failure."""
        return self.variant == "stock"


# The variant each release ships, patched into every release, against that release's stock:
# "original" patched into 0.33 must equal stock 0.31, "fixed" patched into 0.31 stock 0.32,
# "none" patched into 0.33 stock 0.30, and so on for every pair. A release against itself
# tells a wrong variant from a wrong adapter.
FIDELITY_CHECKS = tuple(
    FidelityCheck(shipped.ships, patched_into=other, stock_of=release)
    for release, shipped in RELEASES.items()
    for other in RELEASES
)


def dev_checks(reports: dict[str, ReleaseReport]) -> tuple[FidelityCheck, ...]:
    """With a dev report: its stock against the release it is driven as (informational), and
    each release's variant patched into the dev build against that release's stock (the
    adapter drives the dev build faithfully)."""
    dev = reports.get(DEV)
    if dev is None:
        return ()
    informational = FidelityCheck("stock", patched_into=DEV, stock_of=nearest_release(dev.version))
    patched = (
        FidelityCheck(shipped.ships, patched_into=DEV, stock_of=release)
        for release, shipped in RELEASES.items()
    )
    return (informational, *patched)


# What must be equal: the verdict, the failing pool sizes, the fit, and the diagnosis (which
# names the free and reserved blocks at the failure).
COMPARED_FIELDS = ("observed", "kind", "failing_pools", "fit", "detail")


@dataclass(frozen=True)
class FidelityResult:
    check: FidelityCheck
    status: Literal["equal", "differs", "not_run"]
    compared: int  # cases compared
    differences: tuple[str, ...] = ()
    reason: str = ""  # why it did not run
    # Cases not compared: their case files, or the layouts derived for them, differ.
    changed: tuple[str, ...] = ()


def _shown(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def _difference(case: str, patched: Cell, stock: Cell) -> str | None:
    fields = [f for f in COMPARED_FIELDS if getattr(patched, f) != getattr(stock, f)]
    if not fields:
        return None
    shown = "; ".join(
        f"{f}: patched {_shown(getattr(patched, f))!r} vs stock {_shown(getattr(stock, f))!r}"
        for f in fields
    )
    return f"{case}: {shown}"


def check_fidelity(check: FidelityCheck, reports: dict[str, ReleaseReport]) -> FidelityResult:
    """Compares the cases both reports ran (a case file may leave a variant out), when the
    same matrix code wrote both."""
    absent = [r for r in dict.fromkeys((check.patched_into, check.stock_of)) if r not in reports]
    if absent:
        return FidelityResult(check, "not_run", 0, reason=f"no report for {', '.join(absent)}")
    patched_report, stock_report = reports[check.patched_into], reports[check.stock_of]
    if patched_report.matrix_digest != stock_report.matrix_digest:
        reason = "the reports were written by different matrix code: rerun both envs"
        return FidelityResult(check, "not_run", 0, reason=reason)
    patched = patched_report.cells_of(check.variant)
    stock = stock_report.cells_of("stock")
    ran = sorted(
        case
        for case in patched.keys() & stock.keys()
        if "skip" not in (patched[case].observed, stock[case].observed)
    )
    changed = tuple(c for c in ran if patched[c].case_digest != stock[c].case_digest)
    both = [c for c in ran if c not in changed]
    if not both:
        return FidelityResult(check, "not_run", 0, reason="no case ran in both reports")
    found = [_difference(case, patched[case], stock[case]) for case in both]
    differences = tuple(d for d in found if d)
    status: Literal["equal", "differs"] = "differs" if differences else "equal"
    return FidelityResult(check, status, len(both), differences, changed=changed)


# --- the cross-version table ---------------------------------------------------------------


def _stock_cells(reports: dict[str, ReleaseReport]) -> dict[str, dict[str, Cell]]:
    by_case: dict[str, dict[str, Cell]] = {}
    for release, report in reports.items():
        for case, cell in report.cells_of("stock").items():
            by_case.setdefault(case, {})[release] = cell
    return dict(sorted(by_case.items()))


def cases_by_release(reports: dict[str, ReleaseReport]) -> Table:
    """Stock on each release; a leading ``!`` marks a case some release ran against its
    expectation."""
    rows = []
    for case, cells in _stock_cells(reports).items():
        mismatch = any(not c.as_expected for c in cells.values())
        texts = [cell_text(cells[r]) if r in cells else "-" for r in reports]
        rows.append([row_label(case, mismatch), *texts])
    return ["case", *reports], rows


def summary_by_release(reports: dict[str, ReleaseReport]) -> Table:
    """The upstream table's columns, one row per release (stock)."""
    stock = [c for r in reports.values() for c in r.cells if c.variant == "stock"]
    columns = columns_of(stock)
    rows = []
    for report in reports.values():
        cells = report.cells_of("stock").values()
        row = [report.label]
        for column in columns:
            members = [c for c in cells if c.column == column]
            row.append(column_verdict(members) if members else "-")
        rows.append(row)
    return ["Release (stock)", *columns], rows


# --- output --------------------------------------------------------------------------------


def _compared(result: FidelityResult) -> str:
    if result.status == "not_run":
        return result.reason
    changed = f" ({len(result.changed)} changed cases not compared)" if result.changed else ""
    plural = "" if result.compared == 1 else "s"
    return f"{result.compared} case{plural}{changed}"


def _status(result: FidelityResult) -> str:
    if result.check.informational and result.status == "differs":
        return "changed"  # the dev build's own change, not a fidelity failure
    return {"equal": "equal", "differs": "DIFFERS", "not_run": "not run"}[result.status]


def _fidelity_line(result: FidelityResult) -> str:
    return f"{_status(result):<8} {result.check}: {_compared(result)}"


def markdown(reports: dict[str, ReleaseReport], results: Sequence[FidelityResult]) -> str:
    parts = [
        "# KV reservation matrix across vLLM releases (stock)",
        "",
        f"From {', '.join(str(r.path.name) for r in reports.values())}.",
        "",
        "## Summary",
        "",
        render_markdown(summary_by_release(reports)),
        "",
        "## Cases x releases",
        "",
        render_markdown(cases_by_release(reports)),
        "",
        "## Fidelity: each patched variant against the release that shipped it",
        "",
    ]
    rows = [[str(r.check), _status(r).lower(), _compared(r)] for r in results]
    parts.append(render_markdown((["check", "result", "cases compared"], rows)))
    differing = [r for r in results if r.differences]
    if differing:
        parts += ["", "### Differences", ""]
        parts += [f"- {r.check}: {d}" for r in differing for d in r.differences]
    return "\n".join(parts) + "\n"


def json_document(
    reports: dict[str, ReleaseReport], results: Sequence[FidelityResult]
) -> dict[str, Any]:
    header, rows = summary_by_release(reports)
    return {
        "releases": {r: report.version for r, report in reports.items()},
        "cases": {
            case: {
                release: {f: getattr(cell, f) for f in (*COMPARED_FIELDS, "as_expected")}
                for release, cell in cells.items()
            }
            for case, cells in _stock_cells(reports).items()
        },
        "summary": {
            release: dict(zip(header[1:], row[1:], strict=True))
            for release, row in zip(reports, rows, strict=True)
        },
        "fidelity": [
            {**asdict(r.check), **{k: v for k, v in asdict(r).items() if k != "check"}}
            for r in results
        ],
    }


def main(paths: Sequence[Path], out: Path) -> int:
    """Print and write the cross-version report; 1 when a fidelity check differs, when none
    across two releases ran, or when a release skipped every cell."""
    try:
        reports = load_reports(paths)
    except ReportError as error:
        print(f"matrix crossversion: {error}")
        return 2
    if not reports:
        print(f"matrix crossversion: no vllm-*.json reports in {', '.join(map(str, paths))}")
        return 2
    checks = (*FIDELITY_CHECKS, *dev_checks(reports))
    results = [check_fidelity(check, reports) for check in checks]
    print(render_text(summary_by_release(reports)))
    print()
    print(render_text(cases_by_release(reports)))
    print()
    for result in results:
        print(_fidelity_line(result))
        for difference in result.differences:
            print(f"    {difference}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "cross-version.md").write_text(markdown(reports, results), encoding="utf-8")
    document = json.dumps(json_document(reports, results), indent=2) + "\n"
    (out / "cross-version.json").write_text(document, encoding="utf-8")
    print(f"\ncross-version report written to {out / 'cross-version.md'} and .json")
    problems = [
        f"every cell of vLLM {r.version} skipped: {r.skipped}"
        for r in reports.values()
        if r.skipped
    ]
    problems += [
        f"{r.check}: differs"
        for r in results
        if r.status == "differs" and not r.check.informational
    ]
    if not any(r.status != "not_run" and r.check.across_releases for r in results):
        problems.append("no check across two releases could run (each needs both reports)")
    for problem in problems:
        print(f"matrix crossversion: {problem}")
    return 1 if problems else 0
