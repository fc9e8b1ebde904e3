"""The pytest plugin end to end: collection, ids, reports, xdist, and the shipped matrix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from matrix.case.expansion import cells_from_file
from tests.helpers import (
    CASES,
    TWO_GROUP_CASE,
    XDIST_RUN,
    needs_vllm,
    replaced,
    shipped_verdict,
)

pytestmark = needs_vllm

INI = "[pytest]\nmatrix_cases = cases\n"
SMALL = TWO_GROUP_CASE


@pytest.fixture
def project(inline: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A project with one small case, run in this process (see the ``inline`` fixture), its
    tables as wide as without a terminal (xdist's workers say 80 columns)."""
    monkeypatch.setenv("COLUMNS", "120")
    inline.makefile(".ini", pytest=INI)
    (inline.path / "cases").mkdir()
    (inline.path / "cases" / "small.yaml").write_text(SMALL)
    return inline


def test_cells_are_tests_with_reports(project: pytest.Pytester) -> None:
    result = project.runpytest_inprocess(
        "-p", "no:cacheprovider", "--matrix-report=out/r.json", "--matrix-report=out/r.md"
    )
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(["*KV reservation matrix*", "Original*Fail*", "This fix*Pass*"])
    cells = json.loads((project.path / "out" / "r.json").read_text())["cells"]
    assert {(c["variant"], c["observed"]) for c in cells} >= {
        ("original", "fail"),
        ("fixed", "pass"),
    }
    assert "| Original (original) | Fail |" in (project.path / "out" / "r.md").read_text()


def test_k_and_m_select_cells(project: pytest.Pytester) -> None:
    project.runpytest_inprocess("-p", "no:cacheprovider", "-k", "original").assert_outcomes(
        passed=1
    )
    project.runpytest_inprocess("-p", "no:cacheprovider", "-m", "fixed or stock").assert_outcomes(
        passed=2
    )
    result = project.runpytest_inprocess("-p", "no:cacheprovider", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["cases/small.yaml::small-original"])


def test_a_wrong_expectation_fails_the_run(project: pytest.Pytester) -> None:
    # group_count: no release ships it, so stock is not held to this expectation too.
    (project.path / "cases" / "small.yaml").write_text(
        replaced(SMALL, ("original: fail", "original: fail, group_count: fail"))
    )
    result = project.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=6, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*small.yaml:10: expected fail, observed pass (finished)*",
            "! small*pass (expected fail)*",
        ]
    )


def test_invalid_file_is_one_line_and_others_still_run(project: pytest.Pytester) -> None:
    (project.path / "cases" / "broken.yaml").write_text(
        replaced(SMALL, ("prompt: 16", "prompt: -1"))
    )
    result = project.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=7, failed=1)
    result.stdout.fnmatch_lines(
        ["*broken.yaml:9: requests.0.prompt: Input should be greater than 0"]
    )
    assert "Traceback" not in result.stdout.str()


def test_last_failed_reruns_only_the_failure(project: pytest.Pytester) -> None:
    (project.path / "cases" / "small.yaml").write_text(
        replaced(SMALL, ("original: fail", "original: fail, group_count: fail"))
    )
    project.runpytest_inprocess().assert_outcomes(passed=6, failed=1)
    project.runpytest_inprocess("--lf").assert_outcomes(failed=1)  # the 6 passing cells are not run


@pytest.mark.once
def test_xdist_gives_the_same_cells(inline: pytest.Pytester, xdist_shard: Path) -> None:
    """Under xdist the controller's tables and report hold exactly the cells of a serial run:
    every cell crossed from a worker's process as a report property. (One worker: each
    imports vLLM, seconds of the suite's budget, and more would merge the same way.)"""
    serial = inline.runpytest_inprocess(*XDIST_RUN, "--matrix-report=serial.json")
    assert serial.ret == 0
    reports = [json.loads(p.read_text()) for p in (inline.path / "serial.json", xdist_shard)]
    assert reports[0] == reports[1]
    assert reports[0]["cells"]


TABLE_FILES = (
    "single_group.yaml",
    "multiple_groups.yaml",
    "different_block_sizes.yaml",
    "mamba_none.yaml",
    "mamba_align.yaml",
)


def test_shipped_cases_reproduce_the_upstream_table(adapter: Any) -> None:
    from matrix.installed import expected_stock
    from matrix.judge.result import result_of
    from matrix.report.tables import summary_table

    ships = expected_stock()
    cells = [
        result_of(cell, shipped_verdict(adapter, cell))
        for name in TABLE_FILES
        for cell in cells_from_file(CASES / name, ships)
    ]
    header, rows = summary_table(cells)
    table = {row[0]: dict(zip(header[1:], row[1:], strict=True)) for row in rows}
    core = ("Single group", "Multiple groups", "Different block sizes")
    assert [table["Original"][c] for c in core] == ["Pass", "Fail", "Fail"]
    assert [table["Original x group count"][c] for c in core] == ["Pass", "Pass", "Fail"]
    assert [table["This fix"][c] for c in core] == ["Pass", "Pass", "Pass"]
    for mamba in ("Mamba none", "Mamba align"):
        assert table["all_groups"][mamba] == "Fail"
        assert table["This fix"][mamba] == "Pass"
    # Stock is the variant its release ships: the same outcome at every pool size.
    same = ("observed", "kind", "detail", "failing_pools")
    patched = {c.case: [getattr(c, f) for f in same] for c in cells if c.variant == ships}
    stock = {c.case: [getattr(c, f) for f in same] for c in cells if c.variant == "stock"}
    assert stock == patched
    assert all(c.as_expected for c in cells)


def test_report_name_is_checked_before_running(project: pytest.Pytester) -> None:
    result = project.runpytest_inprocess("--matrix-report=out.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--matrix-report out.txt: use a .md, .json or .html file name"])


def test_a_case_file_named_on_the_command_line(inline: pytest.Pytester) -> None:
    """Outside the matrix_cases directories, a YAML file runs when it is named."""
    (inline.path / "elsewhere").mkdir()
    (inline.path / "elsewhere" / "mine.yaml").write_text(SMALL)
    (inline.path / "elsewhere" / "other.yaml").write_text("not: a case\n")
    result = inline.runpytest_inprocess("-p", "no:cacheprovider", "elsewhere/mine.yaml")
    result.assert_outcomes(passed=7)


def test_a_directory_named_on_the_command_line(inline: pytest.Pytester) -> None:
    """A folder of case files outside matrix_cases runs when named, as pytest collects the
    test files of a named folder."""
    (inline.path / "mine" / "deeper").mkdir(parents=True)
    (inline.path / "mine" / "deeper" / "small.yaml").write_text(SMALL)
    result = inline.runpytest_inprocess("-p", "no:cacheprovider", "mine", "--matrix-report=x.json")
    result.assert_outcomes(passed=7)
    assert len(json.loads((inline.path / "x.json").read_text())["cells"]) == 7


def test_a_named_directory_without_case_files_says_so(pytester: pytest.Pytester) -> None:
    (pytester.path / "empty").mkdir()
    (pytester.path / "empty" / "notes.txt").write_text("nothing to run\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "empty")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*empty: no case files (*.yaml, *.yml) and no tests"])


def test_a_default_expectations_failure_says_so_at_the_cases_expect(
    inline: pytest.Pytester,
) -> None:
    """A cell failing against pass by default (its variant has no entry) is reported at the
    case's ``expect:`` line, where its entry would go, saying the pass is the default."""
    text = "# the case\n\n" + replaced(SMALL, ("{none: fail, original: fail}", "{original: fail}"))
    inline.makefile(".yaml", small=text)
    result = inline.runpytest_inprocess("small.yaml", "-p", "no:cacheprovider", "-m", "none")
    result.assert_outcomes(failed=1)
    line = text.splitlines().index("expect: {original: fail}") + 1
    result.stdout.fnmatch_lines(
        [
            f"*small.yaml:{line}: expected pass (by default: the case has no expect entry for "
            "none), observed fail*"
        ]
    )
