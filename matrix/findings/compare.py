"""``python -m matrix.findings.compare PATCHED UNPATCHED``: the findings' patches against the
matrix (the last step of ``tox -e patched034``): stock on the release's tree with the patches
applied must give, case by case, what ``proposed`` gives on the unpatched release: the same verdict,
failure kind, failing pools, fit and diagnosis, every unfinished pool's kind and severity,
the tightness and the startable pool (``PATCH_FIELDS``), from the two envs' JSON reports
written by the same matrix code. Writes ``fidelity-<version>.md`` beside
the patched report.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from matrix.report.fidelity import COMPARED_FIELDS, FidelityCheck, FidelityResult, check_fidelity
from matrix.report.release_reports import DEV, ReleaseReport, ReportError, load_reports

PATCHED = "patched"  # the patched report's key beside the release's
# Beyond the cross-version checks' fields: every unfinished pool with its kind and severity
# (below the fit too), the tightness and the startable pool.
PATCH_FIELDS = (*COMPARED_FIELDS, "failures", "over_reservation", "startable")


def load_one(path: Path) -> ReleaseReport:
    """The one report at ``path``; raises :class:`ReportError` naming it."""
    if not path.is_file():
        raise ReportError(f"{path}: no such report")
    (report,) = load_reports([path]).values()
    return report


def patch_fidelity(patched: ReleaseReport, unpatched: ReleaseReport) -> FidelityResult:
    """``proposed`` on ``unpatched`` against stock on ``patched``, case by case."""
    check = FidelityCheck("proposed", patched_into=unpatched.release, stock_of=PATCHED)
    if unpatched.release == DEV or patched.release != DEV:
        reason = f"{patched.path} is not a patched tree's report, or {unpatched.path} is one"
        return FidelityResult(check, "not_run", 0, reason=reason)
    return check_fidelity(check, {unpatched.release: unpatched, PATCHED: patched}, PATCH_FIELDS)


def summary(result: FidelityResult, patched: ReleaseReport, unpatched: ReleaseReport) -> str:
    """The check in words, with the counts, as the terminal and the Markdown file show it."""
    title = f"stock on vLLM {patched.version} patched == proposed on vLLM {unpatched.version}"
    if result.status == "not_run":
        return f"not run   {title}: {result.reason}"
    cells = unpatched.cells_of("proposed").values()
    failing = sum(1 for cell in cells if cell.observed != "pass")
    pools = sum(len(cell.failures) for cell in cells)
    counts = (
        f"{result.compared} cases compared ({failing} where proposed does not pass; "
        f"{pools} unfinished pools, each with its kind and severity)"
    )
    if result.changed:
        counts += f", {len(result.changed)} changed cases not compared"
    return f"{'equal' if result.status == 'equal' else 'DIFFERS':<9} {title}: {counts}"


def markdown(result: FidelityResult, line: str) -> str:
    """The check as a Markdown file: the line and every difference."""
    parts = ["# The findings' patch against `proposed`", "", line, ""]
    parts += [f"- {difference}" for difference in result.differences]
    return "\n".join(parts).rstrip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Prints and writes the check; 0 when equal, 1 when it differs, 2 when it cannot run."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m matrix.findings.compare", description=__doc__)
    parser.add_argument("patched", type=Path, help="the patched env's JSON report")
    parser.add_argument("unpatched", type=Path, help="the release env's JSON report")
    options = parser.parse_args(argv)
    try:
        patched, unpatched = load_one(options.patched), load_one(options.unpatched)
    except (ReportError, ValueError) as error:
        print(f"matrix patched: {error}", file=sys.stderr)
        return 2
    result = patch_fidelity(patched, unpatched)
    line = summary(result, patched, unpatched)
    print(line)
    for difference in result.differences:
        print(f"    {difference}")
    out = options.patched.parent / f"fidelity-{unpatched.version}.md"
    out.write_text(markdown(result, line), encoding="utf-8")
    print(f"matrix patched: wrote {out}")
    return {"equal": 0, "differs": 1, "not_run": 2}[result.status]


if __name__ == "__main__":
    sys.exit(main())
