"""``python -m matrix finding NAME``: a finding of docs/findings.md as what a vLLM maintainer
reads (an issue, or a comment on its thread), from the doc, the finding's patches and the
reports of a run over the findings (no vLLM)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from matrix.__main__ import main
from matrix.findings.doc import (
    DOC,
    Finding,
    FindingError,
    find,
    finding_patch,
    patched_versions,
    read_findings,
)
from matrix.findings.issue import issue_body
from matrix.findings.measured import FINDINGS_REPORTS, environment, releases_table
from matrix.report.release_reports import ReleaseReport, load_reports

TEXT = DOC.read_text()
# This project's words, which a maintainer does not know: allowed only in the closing line.
PROJECT_WORDS = re.compile(
    r"\bfit \d|\bthe fit\b|startable|unpromotable|over_reservation|undersized|variants?\b|"
    r"\bcells?\b|matrix|harness|`(proposed|fixed|original|group_count|all_groups)`|"
    r"\bfinding \d|\bsweep|severity|\btox\b|docs/findings|issue 37|\(lead's\)|"
    r"\b(core|quick) tier\b|\(below\)",
    re.I,
)


def body(number: str, reports: list[ReleaseReport] | None = None) -> str:
    finding = find(TEXT, number)
    patches = {v: p for v in patched_versions() if (p := finding_patch(finding, v))}
    return issue_body(finding, reports or [], patches)


def test_every_finding_has_what_a_maintainer_reads() -> None:
    findings = {f.number: f for f in read_findings(TEXT)}
    assert list(findings) == [1, 2, 3, 4, 6]
    for finding in findings.values():
        assert finding.paragraph("In the matrix"), finding.number
        if finding.reported_with:  # its words are the issue's it is reported in
            continue
        for label in ("Summary", "Observed", "Expected", "Where", "Reach in a deployment"):
            assert finding.paragraph(label), (finding.number, label)
        for label in ("Threads", "Fix", "Cost"):
            assert finding.paragraph(label), (finding.number, label)
    assert findings[1].thread == "https://github.com/vllm-project/vllm/pull/46892"
    assert [findings[n].thread for n in (2, 3, 4, 6)] == [None, None, None, None]
    # Findings 3 and 6 are one miscount of the admitting load: one issue, one patch.
    assert [f.reported_with for f in findings.values()] == [None, None, None, None, 3]
    assert [f.pull_request for f in findings.values()] == [False, True, False, False, False]
    assert [f.severity for f in findings.values()] == [
        "unpromotable",
        None,
        "over_reservation",
        "error",
        "unpromotable",
    ]


def test_a_finding_is_named_by_its_case_file_or_its_number() -> None:
    assert find(TEXT, "3").name == "margin_per_group"
    assert find(TEXT, "failed_load_full_groups").number == 4
    with pytest.raises(FindingError, match=r"no finding 'nine' in findings\.md"):
        find(TEXT, "nine")


def test_the_table_of_the_patches_names_each_finding_s_patch() -> None:
    """Finding 3's patch carries finding 6's test too (one patch for one miscount); finding 6
    has no patch of its own."""
    assert find(TEXT, "partial_load_margin").number == 6
    assert find(TEXT, "3").patch == "3-async-load-admission"
    assert finding_patch(find(TEXT, "6"), "0.34.0") is None
    for version in patched_versions():
        found = finding_patch(find(TEXT, "3"), version)
        assert found is not None and found.test_names == (
            "test_async_load_is_admitted_in_a_pool_the_engine_starts_with",
            "test_async_load_is_admitted_only_if_it_can_be_promoted",
        )
    assert patched_versions()[-1] == "0.34.0"


@pytest.mark.parametrize("number", ["1", "2", "3", "4"])
def test_each_body_is_short_in_vllm_s_words_with_the_test_first(number: str) -> None:
    text = body(number)
    lines = text.splitlines()
    assert len(lines) < 120
    *words, closing = lines
    assert closing.startswith("How this was found: vllm-kv-matrix")
    found = [m.group(0) for m in PROJECT_WORDS.finditer("\n".join(words))]
    assert not found, found
    assert "diff --git" not in text and "\n@@ " not in text  # the tests' code, no hunks
    if number == "2":  # a pull request: its own template below
        return
    # The test and the command that runs it in a checkout come before what is observed.
    assert text.index("```bash\npytest tests/v1/") < text.index("**Observed (v0.34.0).**")
    assert "**Expected.**" in text and "**Where (v0.34.0).**" in text
    # One release's lines; a link to the patch for each release, but on a thread (a pull
    # request's branch) the newest release's only.
    assert not re.search(r":\d+ / :\d+", text)
    patch = find(TEXT, number).patch or f"{number}-"
    for version in patched_versions():
        linked = f"`vllm-{version}/{patch}" in text
        assert linked == (number != "1" or version == "0.34.0"), version


def test_finding_1_is_a_comment_on_46892_and_the_others_are_issues() -> None:
    comment = body("1")
    assert comment.startswith("<!-- A comment for https://github.com/vllm-project/vllm/pull/46892")
    assert "# [Bug]" not in comment and "Before submitting" not in comment
    assert "EngineCore" in comment  # the live hang belongs in it
    assert "Still unchanged in v0.34.0." in comment
    assert not re.search(r"v0\.3[0-3]\.0", comment.split("**Reach")[0])  # for main, not releases
    for number in ("3", "4"):
        issue = body(number)
        assert issue.startswith("# [Bug]: ")
        assert "### Your current environment" in issue and "### 🐛 Describe the bug" in issue
        # The box is for whoever files the issue.
        assert "- [ ] Make sure you already searched" in issue and "- [x]" not in issue


def test_finding_2_is_a_small_pull_request_carrying_its_numbers() -> None:
    text = body("2")
    assert text.startswith("# [Core] check_enough_kv_cache_memory")
    for section in ("## Purpose", "## Test Plan", "## Test Result"):
        assert f"\n{section}\n\n" in text
        assert not text.split(f"\n{section}\n\n", 1)[1].startswith("\n")  # not left empty
    assert "18 blocks' worth" in text and "19" in text  # its numbers, not a pointer to them
    words = text.rsplit("\n---\n", 1)[0]  # the closing line names where it was found
    assert "findings.md" not in words and "[Bug]" not in words
    for thread in ("58175", "51742", "56445", "46462"):
        assert f"vllm#{thread}" in text
    assert "- [ ] The purpose of the PR" in text and "- [x]" not in text


def test_findings_3_and_6_are_one_issue_with_both_tests(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = body("3")
    assert "2 tests for vLLM's tree" in text
    assert (
        '-k "test_async_load_is_admitted_in_a_pool_the_engine_starts_with or '
        'test_async_load_is_admitted_only_if_it_can_be_promoted"'
    ) in text
    assert "Too high" in text and "Too low" in text
    # Each test's head (parameters, docstring); its body is in the attached patch.
    assert text.count('    """\n    ...\n') == 2 and "scheduler.schedule()" not in text
    # The admitting load's margin came with #57104; the in-flight reservation with #44560.
    threads = find(TEXT, "3").paragraph("Threads")
    assert threads.index("vllm#57104") < threads.index("margin this patch replaces")
    assert "review of an earlier form" not in TEXT
    # The cost, at more than one load latency, as what it is.
    assert "20 steps against 18" in text and "22 against 19" in text and "24 against 20" in text
    assert main(["finding", "6", "--out", str(tmp_path / "6.md"), "--reports", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert out == text and "reported in finding 3's issue" in err


def test_the_body_names_only_its_own_patch_with_its_test() -> None:
    text = body("4")
    assert "4-nixl-failed-load-per-request.patch" in text
    assert not re.search(r"[123]-[a-z-]+\.patch", text)  # not the other findings' patches
    assert "def test_failed_load_with_full_attention_groups_is_reported_per_request" in text
    assert "-k test_failed_load_with_full_attention_groups_is_reported_per_request" in text
    linked = issue_body(
        find(TEXT, "4"),
        [],
        {"0.33.0": finding_patch(find(TEXT, "4"), "0.33.0")},  # type: ignore[dict-item]
        "https://example.org/patches",
    )
    assert (
        "[vllm-0.33.0/4-nixl-failed-load-per-request.patch](https://example.org/patches/"
        "vllm-0.33.0/4-nixl-failed-load-per-request.patch)"
    ) in linked


def test_the_environment_states_what_ran_even_without_reports() -> None:
    text = environment("0.33.0")
    assert "vLLM 0.33.0 (its Python source as released" in text
    assert "PyTorch 2.13.0+cpu, the CPU build; vLLM 0.33.0 declares 2.14.0" in text
    assert "no GPU" in text
    issue = body("3")
    assert "see the table below" not in issue and "unknown" not in issue
    assert "**Measured**" not in issue  # no report: no table, and no advice in the body


def cell(case: str, kind: str, pools: list[int], severity: str) -> dict[str, Any]:
    return {
        "case": case,
        "column": None,
        "variant": "stock",
        "expected": "pass",
        "expected_kind": None,
        "observed": "fail" if pools else "pass",
        "kind": kind if pools else "finished",
        "detail": "",
        "source": "docs/findings/x.yaml:1",
        "as_expected": not pools,
        "fit": 8,
        "failing_pools": pools,
        "failures": [{"pool": p, "kind": kind, "severity": severity} for p in pools],
        "swept": [7, 9],
    }


def reports(tmp_path: Path, cells: list[dict[str, Any]], patched: bool = False) -> ReleaseReport:
    data: dict[str, Any] = {"vllm_version": "0.33.0", "cells": cells}
    if patched:
        data["source"] = {"path": "/cache/vllm-0.33.0-patched-abc", "kind": "checkout"}
    path = tmp_path / ("patched.json" if patched else "vllm-0.33.0.json")
    path.write_text(json.dumps(data))
    (report,) = load_reports([path]).values()
    return report


def finding(number: str) -> Finding:
    return find(TEXT, number)


def test_a_case_with_matrix_parameters_is_found_by_its_parameterised_names(
    tmp_path: Path,
) -> None:
    """Finding 4's case has a `matrix:` axis: its cells are `case[policy=...]`."""
    case = "finding_failed_load_full_groups"
    cells = [cell(f"{case}[policy={p}]", "error", [20], "error") for p in ("fail", "recompute")]
    table = releases_table(finding("4"), [reports(tmp_path, cells)], case)
    assert "| 0.33.0, kv_load_failure_policy=fail | at 20 blocks: the engine raises |" in table
    assert "| 0.33.0, kv_load_failure_policy=recompute | at 20 blocks: the engine raises |" in table


def test_the_table_shows_only_failures_of_the_finding_s_own_severity(tmp_path: Path) -> None:
    """Finding 2's case stalls at 17-18 (finding 1's stall): finding 2 shows no table; finding
    1's shows its stall, and the patched tree's row."""
    nemotron = [cell("finding_nemotron_startup", "stall", [17, 18], "unpromotable")]
    report = reports(tmp_path, nemotron)
    assert releases_table(finding("2"), [report], "finding_nemotron_startup") == ""
    assert "never scheduled" not in body("2", [report])
    align = "finding_align_undercount"
    release = reports(tmp_path, [cell(align, "stall", [7], "unpromotable")])
    patched = reports(tmp_path, [cell(align, "stall", [], "unpromotable")], patched=True)
    table = releases_table(finding("1"), [release, patched], align)
    assert "| 0.33.0 | at 7 blocks: admitted as an async load, then never scheduled" in table
    assert "| 0.33.0 with the patches | finishes at every pool from 7 to 9 blocks |" in table
    assert "**Measured**" in body("1", [release, patched])


def test_a_run_over_the_findings_writes_its_own_reports(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The doc's command writes under reports/findings/, which `matrix finding` reads, never a
    release env's reports/vllm-X.*; without reports the advice goes to stderr, not the body."""
    run = TEXT.split("## How to run them", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    written = re.findall(r"--matrix-report=(\S+)", run)
    assert written and all(w.startswith(f"{FINDINGS_REPORTS.as_posix()}/") for w in written)
    assert "tox -e vllm033 -- docs/findings" not in TEXT
    monkeypatch.chdir(tmp_path)
    assert main(["finding", "4", "--out", str(tmp_path / "f.md")]) == 0
    out, err = capsys.readouterr()
    assert "a run over the findings writes its own" in err and "reports/vllm-X.*" in err
    assert "run over the findings" not in out
    assert (tmp_path / "f.md").read_text() == out


def test_an_unknown_finding_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["finding", "nine"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("matrix finding: no finding 'nine'")
    assert "\n" not in err


def test_finding_3_s_issue_measures_finding_6_s_case_beside_its_own(tmp_path: Path) -> None:
    """One issue for one miscount: the pools of both findings' cases, each release's."""
    margin = cell("finding_margin_per_group", "not_admitted", [7, 8], "over_reservation")
    partial = cell("partial_load_margin[connector=mooncake_store]", "stall", [5], "unpromotable")
    release = reports(tmp_path, [margin, partial])
    also = [f for f in read_findings(TEXT) if f.reported_with == 3]
    patches = {v: p for v in patched_versions() if (p := finding_patch(finding("3"), v))}
    text = issue_body(finding("3"), [release] * 5, patches, None, also)
    assert "| 0.33.0 | at 7-8 blocks: never admitted" in text
    assert f"{finding('6').title}:" in text
    assert "| 0.33.0, connector=mooncake_store | at 5 blocks: admitted as an async load" in text
    assert len(text.splitlines()) < 120  # five releases' rows in each table
