"""``python -m matrix record-expectations REPORT [PATHS...]``: a run's observed verdicts
written into its case files as their expectations, as snapshot tools record snapshots, to be
reviewed as a diff (``git diff``; ``--dry-run`` prints the diff and writes nothing). What each
file gets is ``expectation_plan``'s; a file is replaced whole once its new text is checked.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from matrix.case.expansion import case_files
from matrix.case.expectation_edits import EditError
from matrix.case.loading import CaseFileError
from matrix.case.model_paths import is_model_file
from matrix.judge.result import CellResult
from matrix.releases import nearest_release
from matrix.report.report_data import ReportError, read_report
from matrix.tools.expectation_plan import Plan, plan_file
from matrix.variant_names import VARIANT_NAMES, BuiltInVariant
from matrix.wording import plural

LISTED = 5  # recorded cells named per file


def _written(plan: Plan, dry_run: bool) -> None:
    """The plan's text in its file (written whole, then renamed), or its diff printed."""
    if dry_run:
        before = plan.path.read_text(encoding="utf-8").splitlines(keepends=True)
        after = plan.text.splitlines(keepends=True)
        name = str(plan.path)
        sys.stdout.writelines(difflib.unified_diff(before, after, name, name))
        return
    partial = plan.path.with_name(f".{plan.path.name}.{os.getpid()}")
    partial.write_text(plan.text, encoding="utf-8")
    partial.replace(plan.path)


def _said(plan: Plan, dry_run: bool) -> str:
    shown = ", ".join(f"{test_id}: {value}" for test_id, value in plan.recorded[:LISTED])
    more = len(plan.recorded) - LISTED
    done = "to record" if dry_run else "recorded"
    return (
        f"{plan.path}: {plural(len(plan.recorded), 'expectation')} {done} ({shown}"
        + (f" and {more} more" if more > 0 else "")
        + ")"
    )


def main(report_path: Path, paths: Sequence[Path], dry_run: bool = False) -> int:
    """Records the report's verdicts in the case files ``paths`` name; 0 when every file that
    needed it was recorded, 1 when one could not be (said in one line), 2 for a report that
    cannot be read."""
    try:
        read = read_report(report_path)
    except ReportError as error:
        print(f"matrix record-expectations: {error}", file=sys.stderr)
        return 2
    report: dict[str, CellResult] = {f"{c.case}-{c.variant}": c for c in read.cells}
    ships: BuiltInVariant = read.info.ships if read.info.ships in VARIANT_NAMES else "fixed"
    release = nearest_release(str(read.info.vllm_version).split(" ")[0])
    variants = (*VARIANT_NAMES, *sorted({c.variant for c in read.cells} - set(VARIANT_NAMES)))
    files = [f for p in paths for f in case_files(p) if not is_model_file(f)]
    found: set[str] = set()
    recorded, refused = 0, 0
    notes: list[str] = []
    for path in files:
        try:
            plan = plan_file(path, report, ships, variants, notes, found, release)
        except (EditError, CaseFileError) as error:
            print(f"{path}: not recorded: {error}".splitlines()[0])
            refused += 1
            continue
        if plan is not None:
            _written(plan, dry_run)
            print(_said(plan, dry_run))
            recorded += len(plan.recorded)
    for note in notes:
        print(note)
    elsewhere = sorted(set(report) - found)
    if elsewhere:
        print(
            f"{plural(len(elsewhere), 'cell')} of the report in none of the files given "
            f"(the first: {elsewhere[0]})"
        )
    done = "to write" if dry_run else "recorded; review them with git diff"
    print(f"record-expectations: {plural(recorded, 'expectation')} {done}")
    return 1 if refused else 0
