"""The pytest plugin end to end: collection, ids, reports, xdist, and the shipped matrix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import CASES, TWO_GROUP_CASE, needs_vllm, replaced

pytestmark = needs_vllm

INI = "[pytest]\nmatrix_cases = cases\n"
SMALL = TWO_GROUP_CASE


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with one small case. Runs go through subprocesses: torch cannot be imported
    twice in one process, which in-process pytester runs would do."""
    pytester.makefile(".ini", pytest=INI)
    (pytester.path / "cases").mkdir()
    (pytester.path / "cases" / "small.yaml").write_text(SMALL)
    return pytester


def test_cells_are_tests_with_reports(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "--matrix-report=out/r.json", "--matrix-report=out/r.md"
    )
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*KV reservation matrix*", "Original*Fail*", "This fix*Pass*"])
    cells = json.loads((project.path / "out" / "r.json").read_text())["cells"]
    assert {(c["variant"], c["observed"]) for c in cells} >= {
        ("original", "fail"),
        ("fixed", "pass"),
    }
    assert "| Original | Fail |" in (project.path / "out" / "r.md").read_text()


def test_k_and_m_select_cells(project: pytest.Pytester) -> None:
    project.runpytest_subprocess("-p", "no:cacheprovider", "-k", "original").assert_outcomes(
        passed=1
    )
    project.runpytest_subprocess("-p", "no:cacheprovider", "-m", "fixed or stock").assert_outcomes(
        passed=2
    )
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["cases/small.yaml::small-original"])


def test_a_wrong_expectation_fails_the_run(project: pytest.Pytester) -> None:
    # group_count: no release ships it, so stock is not held to this expectation too.
    (project.path / "cases" / "small.yaml").write_text(
        replaced(SMALL, ("original: fail", "original: fail, group_count: fail"))
    )
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=5, failed=1)
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
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=6, failed=1)
    result.stdout.fnmatch_lines(
        ["*broken.yaml:9: requests.0.prompt: Input should be greater than 0"]
    )
    assert "Traceback" not in result.stdout.str()


def test_last_failed_reruns_only_the_failure(project: pytest.Pytester) -> None:
    (project.path / "cases" / "small.yaml").write_text(
        replaced(SMALL, ("original: fail", "original: fail, group_count: fail"))
    )
    project.runpytest_subprocess().assert_outcomes(passed=5, failed=1)
    project.runpytest_subprocess("--lf").assert_outcomes(
        failed=1
    )  # the 5 passing cells are not run


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """The shipped cases, serially and under ``-n 2``."""
    reports = []
    for args in ((), ("-n", "2")):
        directory = tmp_path_factory.mktemp("shipped")
        reports.append(_run_shipped_in(directory, args))
    return reports[0], reports[1]


def _run_shipped_in(directory: Path, args: tuple[str, ...]) -> dict[str, Any]:
    import subprocess
    import sys

    (directory / "pytest.ini").write_text(INI)
    shutil.copytree(CASES, directory / "cases")
    out = directory / "report.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            f"--matrix-report={out}",
            *args,
        ],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def test_xdist_gives_the_same_cells(shipped: tuple[dict[str, Any], dict[str, Any]]) -> None:
    serial, parallel = shipped
    assert parallel == serial
    assert len(serial["cells"]) > 90


def test_shipped_cases_reproduce_the_upstream_table(
    shipped: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    from matrix.judge.result import CellResult
    from matrix.report.tables import summary_table

    cells = [CellResult.from_dict(c) for c in shipped[0]["cells"]]
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
    ships = shipped[0]["ships"]
    same = ("observed", "kind", "detail", "failing_pools")
    patched = {c.case: [getattr(c, f) for f in same] for c in cells if c.variant == ships}
    stock = {c.case: [getattr(c, f) for f in same] for c in cells if c.variant == "stock"}
    assert stock == patched
    assert all(c.as_expected for c in cells)


def test_report_name_is_checked_before_running(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("--matrix-report=out.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--matrix-report out.txt: use a .md or .json file name"])


def test_a_case_file_named_on_the_command_line(pytester: pytest.Pytester) -> None:
    """Outside the matrix_cases directories, a YAML file runs when it is named."""
    (pytester.path / "elsewhere").mkdir()
    (pytester.path / "elsewhere" / "mine.yaml").write_text(SMALL)
    (pytester.path / "elsewhere" / "other.yaml").write_text("not: a case\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "elsewhere/mine.yaml")
    result.assert_outcomes(passed=6)


def test_a_directory_named_on_the_command_line(pytester: pytest.Pytester) -> None:
    """A folder of case files outside matrix_cases runs when named, as pytest collects the
    test files of a named folder."""
    (pytester.path / "mine" / "deeper").mkdir(parents=True)
    (pytester.path / "mine" / "deeper" / "small.yaml").write_text(SMALL)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "mine", "--matrix-report=x.json"
    )
    result.assert_outcomes(passed=6)
    assert len(json.loads((pytester.path / "x.json").read_text())["cells"]) == 6


def test_a_named_directory_without_case_files_says_so(pytester: pytest.Pytester) -> None:
    (pytester.path / "empty").mkdir()
    (pytester.path / "empty" / "notes.txt").write_text("nothing to run\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "empty")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*empty: no case files (*.yaml, *.yml) and no tests"])
