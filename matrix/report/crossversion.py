"""``python -m matrix crossversion``: across releases, from the per-env JSON reports alone (so
the envs may run on different machines): the cross-version table (stock on each release),
rendered with the fidelity checks' results (``matrix.report.fidelity``).

The tables are pure; printing, the files and the exit code live in :func:`main`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from matrix.judge.result import CellResult
from matrix.releases import release_of
from matrix.report.fidelity import (
    COMPARED_FIELDS,
    FIDELITY_CHECKS,
    FidelityResult,
    check_fidelity,
    dev_checks,
)
from matrix.report.fitting import fit_prose, fit_table, terminal_width
from matrix.report.merge import of_suite, report_stem
from matrix.report.release_reports import ReleaseReport, ReportError, load_reports
from matrix.report.tables import (
    Table,
    cell_text,
    column_row,
    columns_of,
    render_markdown,
    row_label,
)

# --- the cross-version table ---------------------------------------------------------------


def _stock_cells(reports: dict[str, ReleaseReport]) -> dict[str, dict[str, CellResult]]:
    by_case: dict[str, dict[str, CellResult]] = {}
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
        rows.append([report.label, *column_row(report.cells_of("stock").values(), columns)])
    return ["Release (stock)", *columns], rows


# --- output --------------------------------------------------------------------------------


def _compared(result: FidelityResult) -> str:
    if result.status == "not_run":
        return result.reason
    left = [f"{len(result.changed)} changed cases"] if result.changed else []
    left += [f"{len(result.resized)} swept over other pools"] if result.resized else []
    shown = f" ({' and '.join(left)} not compared)" if left else ""
    plural = "" if result.compared == 1 else "s"
    return f"{result.compared} case{plural}{shown}"


def _status(result: FidelityResult) -> str:
    if result.check.informational and result.status == "differs":
        # The dev build's own change, or the other admission's: not a fidelity failure.
        return "changed"
    return {"equal": "equal", "differs": "DIFFERS", "not_run": "not run"}[result.status]


def _fidelity_line(result: FidelityResult) -> str:
    line = f"{_status(result):<8} {result.check}: {_compared(result)}"
    if result.check.across_admissions and result.status == "differs":
        line += "; the two releases admit by other code (matrix/releases.py): listed, not failed"
    return line


def markdown(reports: dict[str, ReleaseReport], results: Sequence[FidelityResult]) -> str:
    """The cross-version report as Markdown: summary, cases x releases, fidelity checks."""
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
    resized = [r for r in results if r.resized]
    if resized:
        parts += ["", "### Swept over other pools (not compared)", ""]
        parts += [f"- {r.check}: {', '.join(r.resized)}" for r in resized]
    return "\n".join(parts) + "\n"


def json_document(
    reports: dict[str, ReleaseReport], results: Sequence[FidelityResult]
) -> dict[str, Any]:
    """The cross-version report as JSON data: releases, stock cells, summary, fidelity checks."""
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


def main(paths: Sequence[Path], out: Path, suite: str = "", releases: Sequence[str] = ()) -> int:
    """Print and write the cross-version report of a suite's release reports (the shipped
    cases' unless ``suite`` names another; only ``releases``' when it names some, each of
    which must have one); 1 when a fidelity check differs, when none across two releases ran
    (unless ``releases`` names one only: a table of one release asked for), or when a release
    skipped every cell."""
    named = f"{report_stem('*', False, suite)}.json"
    try:
        reports = load_reports(paths, named)
    except ReportError as error:
        print(f"matrix crossversion: {error}")
        return 2
    asked = {release_of(version): version for version in releases}
    absent = [version for release, version in asked.items() if release not in reports]
    if absent:
        print(f"matrix crossversion: --release {absent[0]}: no report of it in {paths[0]}")
        return 1
    if asked:
        reports = {release: report for release, report in reports.items() if release in asked}
    if not reports:
        print(f"matrix crossversion: no {named} reports in {', '.join(map(str, paths))}")
        return 2
    checks = (*FIDELITY_CHECKS, *dev_checks(reports))
    results = [check_fidelity(check, reports) for check in checks]
    width = terminal_width()
    print("\n".join(fit_table(summary_by_release(reports), width)))
    print()
    print("\n".join(fit_table(cases_by_release(reports), width)))
    print()
    for result in results:
        print("\n".join(fit_prose(_fidelity_line(result), width)))
        for difference in result.differences:
            print("\n".join(fit_prose(difference, width, indent="    ")))
        if result.resized:
            swept = f"swept over other pools, not compared: {', '.join(result.resized)}"
            print("\n".join(fit_prose(swept, width, indent="    ")))
    stem = of_suite(suite, "cross-version")
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{stem}.md").write_text(markdown(reports, results), encoding="utf-8")
        document = json.dumps(json_document(reports, results), indent=2) + "\n"
        (out / f"{stem}.json").write_text(document, encoding="utf-8")
    except OSError as error:  # --out naming a file, a folder it may not write
        print(f"matrix crossversion: cannot write the report to --out {out}: {error}")
        return 2
    print(f"\ncross-version report written to {out / f'{stem}.md'} and .json")
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
    across = any(r.status != "not_run" and r.check.across_releases for r in results)
    if len(asked) == 1:  # one release asked for: no check across releases is owed
        print(
            f"matrix crossversion: one release asked for (--release {releases[0]}): its stock "
            "table, no check across releases to run"
        )
    elif not across:
        problems.append("no check across two releases could run (each needs both reports)")
    for problem in problems:
        print(f"matrix crossversion: {problem}")
    return 1 if problems else 0
