"""Terminal output fits the terminal: tables wrapped or put in bands, prose wrapped, the width
the terminal's (COLUMNS) or 120 without one; the brief tables and their details."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matrix.judge.result import CellResult
from matrix.judge.severity import PoolFailure
from matrix.report.files import RunInfo, shown_in, terminal_lines
from matrix.report.fitting import fit_prose, fit_table, terminal_width, wrap_cell
from matrix.report.models import model_details, models_table
from matrix.report.tables import Table, brief_cell_text, render_text

WORDS = st.text(alphabet="ab_=[], -;:", min_size=0, max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    header=st.lists(WORDS, min_size=1, max_size=9),
    rows=st.lists(st.lists(WORDS, min_size=9, max_size=9), max_size=6),
    width=st.integers(min_value=12, max_value=160),
)
def test_no_line_is_wider_than_the_width(
    header: list[str], rows: list[list[str]], width: int
) -> None:
    table: Table = (header, [row[: len(header)] for row in rows])
    lines = fit_table(table, width)
    assert all(len(line) <= width for line in lines), "\n".join(lines)


@settings(max_examples=200, deadline=None)
@given(text=WORDS, width=st.integers(min_value=1, max_value=30))
def test_a_wrapped_cell_keeps_every_character(text: str, width: int) -> None:
    lines = wrap_cell(text, width)
    assert all(len(line) <= width for line in lines)
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")


def test_a_table_that_fits_is_printed_as_it_is() -> None:
    table: Table = (["case", "stock"], [["a[k=1]", "pass"]])
    assert fit_table(table, 120) == render_text(table).splitlines()


def test_a_wide_table_wraps_its_first_column_and_then_bands() -> None:
    variants = ["stock", "none", "original", "group_count", "all_groups", "fixed", "proposed"]
    rows = [["abort_during_load[when=loaded,sched=false,extra=long_value]", *["unpromotable"] * 7]]
    lines = fit_table((["case", *variants], rows), 80)
    assert all(len(line) <= 80 for line in lines)
    assert lines[0] == "(columns stock to original)"
    assert any(line.startswith("(columns group_count") for line in lines)
    assert any(line.startswith(" ") and "sched=false" in line for line in lines)  # continued


def test_wrapping_breaks_where_ids_break() -> None:
    assert wrap_cell("case[when=loaded,sched=false]", 16) == [
        "case[",
        "when=loaded,",
        "sched=false]",
    ]
    assert wrap_cell("abcdefghij", 4) == ["abcd", "efgh", "ij"]
    assert fit_prose("one two three four", 9, indent="  ") == ["  one two", "    three", "    four"]


def test_the_width_is_the_terminals_or_120(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "97")
    assert terminal_width() == 97
    monkeypatch.delenv("COLUMNS")

    def no_terminal(fd: int = 1) -> None:
        raise OSError("not a terminal")

    monkeypatch.setattr("os.get_terminal_size", no_terminal)
    assert terminal_width() == 120


def cell(case: str, variant: str, severity: str | None, model: str | None = "m") -> CellResult:
    failing = severity is not None and severity != "over_reservation"
    failures = (PoolFailure(9, "stall", severity),) if failing else ()  # type: ignore[arg-type]
    return CellResult(
        case,
        None,
        variant,
        "fail" if failing else "pass",
        None,
        "fail" if failing else "pass",
        "stall" if failing else "finished",
        "detail " * 30,
        "x.yaml:1",
        True,
        fit=12,
        model=model,
        failures=failures,
        severity=severity,  # type: ignore[arg-type]
    )


def test_the_terminal_at_120_columns_has_no_longer_line() -> None:
    variants = ["stock", "none", "original", "group_count", "all_groups", "fixed", "proposed"]
    cells = [
        cell(f"some-model-with-a-long-name[run=align-eagle{k}-past,device=sm{k}0]", v, s)
        for k in range(12)
        for v, s in zip(
            variants, ["unpromotable", "deadlock", None, None, None, None, None], strict=True
        )
    ]
    lines = terminal_lines(cells, RunInfo("0.33.0", "fixed"), 120)
    assert max(len(line) for line in lines) <= 120
    assert "Models" in lines
    assert any("DEADLOCK" in line for line in lines)


def test_the_brief_models_table_and_its_details() -> None:
    cells = [cell("m[a]", "stock", "unpromotable"), cell("m[a]", "fixed", None)]
    header, rows = models_table(cells, brief=True)
    assert header == ["Model", "stock", "fixed"]
    assert rows == [["m", "unpromotable", "ok"]]
    assert model_details(models_table(cells)) == [
        "m under stock: unpromotable below the fit at pool 9 (1 cell)"
    ]
    assert brief_cell_text(cells[0]) == "unpromotable"


def test_with_report_files_the_terminal_shows_the_headline_and_names_them() -> None:
    """A run of 300 cases x 7 variants: its terminal report is the headline's tables, the
    cases against their expectation and the findings (under 150 lines), then where the rest
    is; with no file written (or asked for in full) every table is printed."""
    variants = ["stock", "none", "original", "group_count", "all_groups", "fixed", "proposed"]
    severities = ["unpromotable", "deadlock", None, None, None, None, None]
    cells = [
        cell(f"case_{k:03d}[model=x]", v, s, model=None)
        for k in range(300)
        for v, s in zip(variants, severities, strict=True)
    ]
    cells[7] = dataclasses.replace(cells[7], as_expected=False)  # case_001 under stock
    info = RunInfo("0.34.0", "fixed")
    files = [Path("reports/vllm-0.34.0.md"), Path("reports/vllm-0.34.0.html")]
    short = terminal_lines(cells, info, 120, files)
    assert len(short) < 150, len(short)
    assert "Worst severity per variant" in short and "Tightness" not in short
    text = "\n".join(short)
    assert "Cases with a cell against its expectation (1)" in text
    assert "! case_001[model=x]" in text and "\ncase_002[model=x] " not in text
    assert (
        "In full in reports/vllm-0.34.0.md and reports/vllm-0.34.0.html: Cases x variants, "
        "Tightness" in " ".join(text.split())
    )
    assert "--matrix-full-terminal (merge: --full-terminal) prints them here" in " ".join(
        text.split()
    )
    whole = terminal_lines(cells, info, 120)
    assert "Cases x variants" in whole and "Tightness" in whole and len(whole) > 600
    assert shown_in(files, full=True) == [] and shown_in([Path("r.json"), *files], False) == files
