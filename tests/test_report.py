"""Tables and report files, from cells alone."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from matrix.judge.result import CellResult
from matrix.judge.severity import PoolFailure
from matrix.report.files import RunInfo, markdown_report, terminal_lines, write_report
from matrix.report.gallery import available, planned
from matrix.report.headline import counts_line, reading_guide
from matrix.report.markdown import COMMENT_LIMIT, budgeted
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
    assert "| Original (original) | Pass | Fail |" in text  # both names, once
    assert text.index("## How to read this report") < text.index("## Summary")
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


def test_skipped_cells_show_as_unsupported_with_the_reason() -> None:
    skipped = cell("mamba", "Mamba none", "fixed", "skip")
    assert case_table([skipped])[1] == [["mamba", f"unsupported: {skipped.detail}"]]
    assert summary_table([skipped])[1] == [["This fix", "Unsupported"]]
    mixed = [skipped, cell("mamba2", "Mamba none", "fixed", "pass")]
    assert summary_table(mixed)[1] == [["This fix", "Pass"]]


def test_the_markdown_keeps_the_parts_that_fit_in_their_order() -> None:
    """Each part takes its longest form that still fits, the first in the order first; a
    part that does not fit whole is given in brief or as its line."""
    head = "h" * 100
    whole, brief, line = "a" * 40_000, "a" * 3_000, "a: elsewhere\n"
    later = ["b" * 30_000, "b: elsewhere\n"]
    assert budgeted(head, [[whole, brief, line], later], [0, 1]) == [whole, later[1]]
    assert budgeted(head, [[whole, brief, line], later], [1, 0]) == [brief, later[0]]
    too_big = ["c" * COMMENT_LIMIT, "c: elsewhere\n"]
    assert budgeted(head, [too_big], [0]) == [too_big[1]]


def test_the_summary_gives_the_upstream_names_and_the_variants() -> None:
    _, rows = summary_table(CELLS, both_names=True)
    assert [row[0] for row in rows] == ["Original (original)", "This fix (fixed)"]


def test_the_headline_reconciles_the_summary_with_the_models() -> None:
    """A Summary column's Pass and a model's ``unpromotable`` under the same variant, said
    in one sentence from the cells: where the stalls lie against ``startable``."""
    stall = replace(
        cell("m[prompt=past]", None, "stock", "fail", "fail", "stall"),
        model="m",
        failures=(PoolFailure(7, "stall", "unpromotable"),),
        startable=9,
    )
    table = cell("mamba", "Mamba align", "stock", "pass")
    guide = reading_guide([table, stall])
    assert guide[0] == (
        "**Summary and Models.** Under `stock` the Summary reads Pass in every column, while 1 "
        "model reads `unpromotable` in the Models table: their stalls (1 cell, such as "
        "`m[prompt=past]`) all lie below `startable`, the smallest pool vLLM's start-up sizing "
        "gives an engine serving their requests, so no engine starts with such a pool. The "
        "Summary's columns hold the table cases only (1 case with a `column`)."
    )
    unknown = replace(stall, case="m[prompt=other]", startable=None)
    partly = reading_guide([table, stall, unknown])[0]
    assert "their stalls (2 cells, such as `m[prompt=past]`) lie, in 1 cell, below" in partly
    assert "the other 1 reach `startable` or have none" in partly
    assert not reading_guide([table])[0].startswith("**Summary and Models")
    # Another variant's stalls: said to be alike only where they lie below `startable` too.
    cells = [
        table,
        stall,
        replace(table, variant="fixed"),
        replace(stall, variant="fixed"),
        replace(table, variant="proposed"),
        replace(stall, variant="proposed", startable=None),
    ]
    assert reading_guide(cells)[0].endswith(
        "(1 case with a `column`). Likewise under `fixed`. Under `proposed` some of these "
        "stalls reach `startable`."
    )
    text = markdown_report([table, stall], INFO)
    assert text.index("**Summary and Models.**") < text.index("## Summary")


def test_the_report_does_not_depend_on_the_cells_order() -> None:
    """A merge gives the cells shard by shard, a run in the tables' order: the Markdown (its
    example cells included) and the terminal are the same either way."""
    stalls = [
        replace(
            cell(f"m[prompt={name}]", None, "stock", "fail", "fail", "stall"),
            model="m",
            failures=(PoolFailure(7, "stall", "unpromotable"),),
            startable=9,
        )
        for name in ("a", "b", "c")
    ]
    cells = [cell("mamba", "Mamba align", "stock", "pass"), *stalls]
    shuffled = [cells[3], cells[1], cells[0], cells[2]]
    assert "such as `m[prompt=a]`" in markdown_report(cells, INFO, "r")
    assert markdown_report(shuffled, INFO, "r") == markdown_report(cells, INFO, "r")
    assert terminal_lines(shuffled, INFO, 120) == terminal_lines(cells, INFO, 120)


def test_the_counts_say_the_shape_only_where_every_case_runs_every_variant() -> None:
    """``6 cases x 7 variants`` is 42 cells: a run whose cases name their own variants (a
    findings run: 30 cells) says that each case runs some of them."""
    whole = [cell(f"c{k}", None, v, "pass") for k in range(2) for v in ("original", "fixed")]
    assert counts_line(whole).startswith("4 cells (2 cases x 2 variants): 4 pass;")
    some = whole[:3]
    assert counts_line(some).startswith("3 cells (2 cases, each under some of 2 variants): ")
