"""Tables and report files, from cells alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from matrix.judge.result import CellResult
from matrix.report.files import RunInfo, markdown_report, write_report
from matrix.report.gallery import available, planned
from matrix.report.tables import case_table, summary_table

INFO = RunInfo("0.33.0", ships="fixed")


def cell(
    case: str,
    column: str | None,
    variant: str,
    observed: str,
    expected: str = "pass",
    kind: str = "finished",
) -> CellResult:
    matches = observed in (expected, "skip")
    return CellResult(
        case, column, variant, expected, None, observed, kind, "detail", "x.yaml:1", matches
    )


CELLS = [
    cell("single", "Single group", "original", "pass"),
    cell("single", "Single group", "fixed", "pass"),
    cell("multi[k=1]", "Multiple groups", "original", "fail", "fail", "stall"),
    cell("multi[k=3]", "Multiple groups", "original", "pass", "fail"),  # differs
    cell("multi[k=1]", "Multiple groups", "fixed", "pass"),
    cell("multi[k=3]", "Multiple groups", "fixed", "pass"),
    cell("control", None, "fixed", "pass"),
]


def test_summary_has_the_upstream_shape() -> None:
    header, rows = summary_table(CELLS)
    assert header == ["Implementation", "Single group", "Multiple groups"]
    assert rows == [["Original", "Pass", "Fail"], ["This fix", "Pass", "Pass"]]


def test_case_table_marks_cells_that_differ() -> None:
    header, rows = case_table(CELLS)
    assert header == ["case", "original", "fixed"]
    by_case = {row[0]: row[1:] for row in rows}
    assert by_case["multi[k=1]"] == ["stall", "pass"]  # as the case expects: no FAIL
    assert by_case["! multi[k=3]"] == ["pass (expected fail)", "pass"]
    assert by_case["control"] == ["-", "pass"]


def test_markdown_report(tmp_path: Path) -> None:
    text = markdown_report(CELLS, INFO)
    assert "| Implementation | Single group | Multiple groups |" in text
    assert "| Original | Pass | Fail |" in text
    assert "expected to behave like `fixed`" in text
    assert "`multi[k=3]-original`: detail" in text
    write_report(tmp_path / "r.md", CELLS, INFO)
    drawn = planned(CELLS) if available() else None
    assert (tmp_path / "r.md").read_text() == markdown_report(CELLS, INFO, "r", drawn)


def test_json_report(tmp_path: Path) -> None:
    write_report(tmp_path / "r.json", CELLS, INFO)
    data = json.loads((tmp_path / "r.json").read_text())
    assert (data["vllm_version"], data["ships"]) == ("0.33.0", "fixed")
    first = data["cells"][0]
    assert {"case", "column", "variant", "expected", "observed", "kind", "detail"} <= set(first)
    assert {c["as_expected"] for c in data["cells"]} == {True, False}
    assert {c["observed"] for c in data["cells"]} == {"pass", "fail"}
    assert [c["case"] for c in data["cells"]] == sorted(c["case"] for c in data["cells"])


def test_unknown_report_suffix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.md, \.json or \.html"):
        write_report(tmp_path / "r.txt", CELLS, RunInfo(None))


def test_skipped_cells_show_as_skip() -> None:
    skipped = cell("mamba", "Mamba none", "fixed", "skip")
    assert case_table([skipped])[1] == [["mamba", "skip"]]
    assert summary_table([skipped])[1] == [["This fix", "Skip"]]
    mixed = [skipped, cell("mamba2", "Mamba none", "fixed", "pass")]
    assert summary_table(mixed)[1] == [["This fix", "Pass"]]
