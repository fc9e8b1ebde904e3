"""``python -m matrix upstream --upstream-variant NAME`` as a gate: a variant that fails a test
stock passes fails the run, unless ``--report-only``; the tests' outcomes are given, not run."""

from __future__ import annotations

from pathlib import Path

import pytest

from matrix.__main__ import main
from matrix.upstream import driver
from matrix.upstream.expected import Change, Result, broken

FILE = "tests/v1/core/test_x.py"


def outcomes(**named: str) -> dict[str, Result]:
    made = (
        Result(f"{FILE}::{name}", outcome, f"{name} says no") for name, outcome in named.items()
    )  # type: ignore[arg-type]
    return {r.nodeid: r for r in made}


def test_only_a_test_stock_passes_and_the_variant_does_not_is_broken() -> None:
    found = [
        Change("a", "passed", "failed", ""),
        Change("b", "failed", "passed", ""),
        Change("c", "passed", "absent", ""),
        Change("d", "skipped", "failed", ""),
        Change("e", "xfailed", "error", ""),
    ]
    assert [c.nodeid for c in broken(found)] == ["a", "c", "e"]


@pytest.fixture
def release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A release whose one test passes under stock and fails under ``none``: the arguments."""
    monkeypatch.setattr("matrix.installed.installed_vllm_version", lambda: "9.9.9")
    (tmp_path / FILE).parent.mkdir(parents=True)
    (tmp_path / FILE).write_text("")
    monkeypatch.setattr(driver, "_tests_root", lambda checkout, version, index: tmp_path)
    runs = {None: outcomes(test_a="passed", test_b="passed"), "none": outcomes(test_a="failed")}
    monkeypatch.setattr(driver, "run_pytest", lambda *args: (runs[args[-1]], 1.0))
    expected = tmp_path / "vllm-9.9.9.yaml"
    expected.write_text(f"release: 9.9.9\ntiers: {{quick: [{FILE}]}}\nknown: []\n")
    out = tmp_path / "reports"
    return [
        "upstream",
        "--upstream-variant",
        "none",
        "--expected",
        str(expected),
        "--out",
        str(out),
    ]


def test_a_variant_that_fails_a_passing_test_fails_the_run(
    release: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(release) == 1
    err = capsys.readouterr().err
    assert "2 test(s) pass under stock and fail under `none`: the run fails" in err


def test_report_only_reports_the_same_tests_and_exits_as_stock(
    release: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main([*release, "--report-only"]) == 0
    assert "2 test(s) pass under stock and fail under `none`: reported only" in (
        capsys.readouterr().err
    )
    report = (tmp_path / "reports" / "upstream-9.9.9-none.md").read_text()
    assert "2 test(s) change outcome" in report
