"""The cross-version table and the fidelity checks, from JSON reports alone (no vLLM)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from matrix.report.crossversion import (
    ReportError,
    cases_by_release,
    load_reports,
    main,
    summary_by_release,
)
from matrix.report.fidelity import FIDELITY_CHECKS, FidelityCheck, check_fidelity, dev_checks


def cell(case: str, variant: str, kind: str = "finished", pools: tuple[int, ...] = ()) -> Any:
    failed = kind != "finished"
    return {
        "case": case,
        "column": "Multiple groups" if case.startswith("multi") else "Single group",
        "variant": variant,
        "expected": "pass",
        "expected_kind": None,
        "observed": "fail" if failed else "pass",
        "kind": kind,
        "detail": f"{kind} at pools {pools}",
        "source": "x.yaml:1",
        "as_expected": True,
        "fit": 11,
        "failing_pools": list(pools),
    }


def write(directory: Path, version: str, cells: list[Any], digest: str = "code1") -> Path:
    path = directory / f"vllm-{version}.json"
    data = {"vllm_version": version, "matrix_digest": digest, "cells": cells}
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    stall = {"kind": "stall", "pools": (10,)}
    write(
        tmp_path,
        "0.31.0",
        [cell("multi", "stock", **stall), cell("single", "stock"), cell("multi", "fixed")],
    )
    write(
        tmp_path,
        "0.33.0",
        [
            *(cell("multi", "stock"), cell("single", "stock")),
            *(cell("multi", "original", **stall), cell("single", "original")),
        ],
    )
    return tmp_path


def test_the_issue_s_three_checks_are_among_the_checks() -> None:
    assert {
        FidelityCheck("original", "0.33", "0.31"),
        FidelityCheck("fixed", "0.31", "0.32"),
        FidelityCheck("none", "0.33", "0.30"),
        FidelityCheck("original", "0.31", "0.31"),  # a release against itself
    } <= set(FIDELITY_CHECKS)


def test_tables_have_one_column_or_row_per_release(reports: Path) -> None:
    loaded = load_reports([reports])
    assert list(loaded) == ["0.31", "0.33"]
    assert cases_by_release(loaded) == (
        ["case", "0.31", "0.33"],
        [["multi", "stall", "pass"], ["single", "pass", "pass"]],
    )
    assert summary_by_release(loaded)[1] == [
        ["vLLM 0.31.0", "Pass", "Fail"],
        ["vLLM 0.33.0", "Pass", "Pass"],
    ]


def test_a_faithful_variant_is_equal(reports: Path) -> None:
    result = check_fidelity(FidelityCheck("original", "0.33", "0.31"), load_reports([reports]))
    assert (result.status, result.compared, result.differences) == ("equal", 1 + 1, ())


def test_a_different_failing_pool_set_is_a_difference(reports: Path) -> None:
    write(
        reports, "0.33.0", [cell("multi", "original", "stall", (9, 10)), cell("single", "original")]
    )
    result = check_fidelity(FidelityCheck("original", "0.33", "0.31"), load_reports([reports]))
    assert result.status == "differs"
    assert "failing_pools: patched [9, 10] vs stock [10]" in result.differences[0]


def test_a_check_without_both_reports_does_not_run(reports: Path) -> None:
    result = check_fidelity(FidelityCheck("none", "0.33", "0.30"), load_reports([reports]))
    assert (result.status, result.reason) == ("not_run", "no report for 0.30")


def test_main_writes_both_files_and_fails_on_a_difference(
    reports: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main([reports], out) == 0
    document = json.loads((out / "cross-version.json").read_text())
    assert document["releases"] == {"0.31": "0.31.0", "0.33": "0.33.0"}
    assert document["summary"]["0.31"] == {"Single group": "Pass", "Multiple groups": "Fail"}
    assert document["cases"]["multi"]["0.31"]["failing_pools"] == [10]
    markdown = (out / "cross-version.md").read_text()
    assert "| vLLM 0.31.0 | Pass | Fail |" in markdown
    assert "| original patched into 0.33 == stock 0.31 | equal | 2 cases |" in markdown
    assert "| none patched into 0.33 == stock 0.30 | not run | no report for 0.30 |" in markdown
    assert "equal    original patched into 0.33 == stock 0.31: 2 cases" in capsys.readouterr().out
    write(reports, "0.33.0", [cell("multi", "original"), cell("single", "original")])
    assert main([reports], out) == 1


def test_no_runnable_check_fails(tmp_path: Path) -> None:
    write(tmp_path, "0.33.0", [cell("single", "stock")])
    assert main([tmp_path], tmp_path / "out") == 1


def test_one_release_asked_for_owes_no_check_across_releases(
    reports: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CI player's ``--release 0.33.0`` is a table of one release asked for, not CI's
    missing release: it passes saying so; a release asked for without its report fails; and
    without ``--release`` (CI's own step) one release's report still fails."""
    out = tmp_path / "out"
    assert main([reports], out, releases=["0.33.0"]) == 0
    assert "one release asked for (--release 0.33.0)" in capsys.readouterr().out
    document = json.loads((out / "cross-version.json").read_text())
    assert document["releases"] == {"0.33": "0.33.0"}  # the other report left out
    assert main([reports], out, releases=["0.32.0"]) == 1
    assert "--release 0.32.0: no report of it" in capsys.readouterr().out
    assert main([reports], out, releases=["0.31.0", "0.33.0"]) == 0  # two: checked across
    (reports / "vllm-0.31.0.json").unlink()
    assert main([reports], out) == 1
    assert "no check across two releases could run" in capsys.readouterr().out


def test_bad_reports_are_named(tmp_path: Path) -> None:
    (tmp_path / "vllm-0.33.0.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ReportError, match=r"vllm-0\.33\.0\.json: not a matrix JSON report"):
        load_reports([tmp_path])
    assert main([tmp_path], tmp_path / "out") == 2
    old = cell("single", "stock")
    del old["failing_pools"]
    write(tmp_path, "0.33.0", [old])
    with pytest.raises(ReportError, match="older matrix"):
        load_reports([tmp_path])


ORIGINAL_ON_033 = FidelityCheck("original", "0.33", "0.31")


def test_reports_from_different_matrix_code_are_not_compared(reports: Path) -> None:
    write(reports, "0.33.0", [cell("multi", "original", "stall", (10,))], digest="code2")
    result = check_fidelity(ORIGINAL_ON_033, load_reports([reports]))
    assert (result.status, result.reason) == (
        "not_run",
        "the reports were written by different matrix code: rerun both envs",
    )


def test_a_case_that_changed_between_reports_is_not_compared(reports: Path) -> None:
    edited = {**cell("single", "original", "stall", (3,)), "case_digest": "edited"}
    write(reports, "0.33.0", [cell("multi", "original", "stall", (10,)), edited])
    result = check_fidelity(ORIGINAL_ON_033, load_reports([reports]))
    assert (result.status, result.compared, result.changed) == ("equal", 1, ("single",))


def test_a_case_swept_over_other_pools_is_named_not_compared(
    reports: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A release whose lookup loads more admits from a larger pool: its cells ran other pools,
    a change outside the variant (the fit and the smallest admitting pool are the stock's)."""
    moved = {**cell("single", "original", "stall", (7,)), "swept": [7, 12]}
    write(reports, "0.33.0", [cell("multi", "original", "stall", (10,)), moved])
    result = check_fidelity(ORIGINAL_ON_033, load_reports([reports]))
    assert (result.status, result.compared, result.resized) == ("equal", 1, ("single",))
    assert main([reports], reports / "out") == 0
    printed = " ".join(capsys.readouterr().out.split())  # the table fitted to any width
    assert "1 case (1 swept over other pools not compared)" in printed
    assert "swept over other pools, not compared: single" in printed


def test_a_suite_s_reports_make_their_own_cross_version_report(
    reports: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for release in ("0.31.0", "0.33.0"):
        named = reports / f"vllm-{release}.json"
        named.rename(reports / f"connectors-{named.name}")
    out = reports / "out"
    assert main([reports], out) == 2  # the shipped cases' reports: none in the folder
    assert "no vllm-*.json reports in" in capsys.readouterr().out
    assert main([reports], out, "connectors") == 0
    assert (
        "| original patched into 0.33 == stock 0.31 | equal | 2 cases |"
        in (out / "connectors-cross-version.md").read_text()
    )


def test_skipped_cells_are_not_compared(reports: Path) -> None:
    skipped = {**cell("single", "original"), "observed": "skip", "kind": "skipped"}
    write(reports, "0.33.0", [cell("multi", "original", "stall", (10,)), skipped])
    result = check_fidelity(ORIGINAL_ON_033, load_reports([reports]))
    assert (result.status, result.compared) == ("equal", 1)


def test_a_release_that_skipped_every_cell_fails(
    reports: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    skipped = {**cell("single", "stock"), "observed": "skip", "detail": "lacks X"}
    write(reports, "0.30.0", [skipped])
    assert main([reports], tmp_path / "out") == 1
    assert "every cell of vLLM 0.30.0 skipped: lacks X" in capsys.readouterr().out


def test_a_dev_report_sits_beside_the_release_it_shares_a_version_with(reports: Path) -> None:
    source = {"path": "/src/vllm", "kind": "checkout", "commit": "abc123", "dirty": True}
    stall = {"kind": "stall", "pools": (10,)}
    dev_cells = [cell("multi", "stock", **stall), cell("single", "stock")]
    dev_cells += [cell("multi", "original", **stall), cell("single", "original")]
    data = {"vllm_version": "0.33.0", "matrix_digest": "code1", "cells": dev_cells}
    (reports / "vllm-0.33.0-dev.json").write_text(json.dumps({**data, "source": source}))
    loaded = load_reports([reports])
    assert list(loaded) == ["0.31", "0.33", "dev"]
    assert summary_by_release(loaded)[1][-1][0].startswith("vLLM 0.33.0 (dev: checkout /src/vllm")
    assert cases_by_release(loaded)[0] == ["case", "0.31", "0.33", "dev"]
    checks = {str(c): c for c in dev_checks(loaded)}
    against = check_fidelity(checks["stock dev against stock 0.33"], loaded)
    assert against.status == "differs" and against.differences[0].startswith("multi:")
    # The dev build's change is shown, not failed; the variants patched into it still match.
    assert check_fidelity(checks["original patched into dev == stock 0.31"], loaded).status == (
        "equal"
    )
    assert main([reports], reports / "out") == 0
    assert "changed" in (reports / "out" / "cross-version.md").read_text()


def test_a_check_across_admissions_is_shown_not_failed() -> None:
    """0.34 admits waiting requests by other code than 0.30-0.33 (two queues, loads-only steps,
    parked loads): a variant patched into one and held to the other's stock meets code outside
    the reservation that differs, so its differences are listed, never a failure; a check
    within one admission stays strict."""
    across = FidelityCheck("fixed", patched_into="0.34", stock_of="0.33")
    within = FidelityCheck("fixed", patched_into="0.32", stock_of="0.33")
    itself = FidelityCheck("fixed", patched_into="0.34", stock_of="0.34")
    assert across.across_admissions and across.informational and not across.across_releases
    assert not within.informational and within.across_releases
    assert not itself.informational and not itself.across_releases
