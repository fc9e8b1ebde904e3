"""``python -m matrix finding NAME``: a finding of docs/findings.md as a vLLM bug report's body,
from the doc, the case file, the unit test, the patch and the release reports (no vLLM)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from matrix.__main__ import main
from matrix.findings.doc import DOC, FindingError, find, patch_files, read_findings
from matrix.findings.issue import issue_body, releases_table
from matrix.report.release_reports import load_reports

PATCH = Path(__file__).resolve().parents[1] / "docs" / "findings" / "patches" / "vllm-0.33.0.patch"


def test_every_finding_of_the_doc_is_read_with_what_an_issue_needs() -> None:
    findings = {f.name: f for f in read_findings(DOC.read_text())}
    assert list(findings) == [
        "align_undercount",
        "nemotron_startup",
        "margin_per_group",
        "failed_load_full_groups",
    ]
    for finding in findings.values():
        for label in ("What happens", "Reach in a deployment", "Fix", "Severity"):
            assert finding.paragraph(label), (finding.name, label)
        assert finding.test and finding.test.startswith("test_")
    assert findings["align_undercount"].paragraph("vLLM functions").startswith("(file:line")
    assert "vllm#46892" in findings["align_undercount"].paragraph("Upstream")


def test_a_finding_is_named_by_its_case_file_or_its_number() -> None:
    text = DOC.read_text()
    assert find(text, "3").name == "margin_per_group"
    with pytest.raises(FindingError, match=r"no finding 'nine' in findings\.md"):
        find(text, "nine")


def test_the_patch_is_cut_to_the_files_a_finding_names() -> None:
    text, patch = DOC.read_text(), PATCH.read_text()
    nixl = patch_files(patch, find(text, "failed_load_full_groups"))
    assert "nixl/base_worker.py" in nixl
    assert "sched/scheduler.py" not in nixl
    admission = patch_files(patch, find(text, "align_undercount"))
    assert "kv_cache_coordinator.py" in admission
    assert "base_worker.py" not in admission


def cell(variant: str, kind: str, pools: list[int], severity: str | None) -> dict[str, Any]:
    return {
        "case": "finding_align_undercount",
        "column": None,
        "variant": variant,
        "expected": "pass",
        "expected_kind": None,
        "observed": "fail" if pools else "pass",
        "kind": kind,
        "detail": "",
        "source": "docs/findings/align_undercount.yaml:1",
        "as_expected": not pools,
        "fit": 8,
        "failing_pools": pools,
        "startable": 8,
        "severity": severity,
    }


def test_the_issue_body_has_vllm_s_template_and_the_measured_releases(tmp_path: Path) -> None:
    report = tmp_path / "vllm-0.33.0.json"
    cells = [cell("stock", "stall", [7], "unpromotable"), cell("proposed", "finished", [], None)]
    report.write_text(json.dumps({"vllm_version": "0.33.0", "cells": cells}))
    reports = list(load_reports([report]).values())
    text = DOC.read_text()
    finding = find(text, "align_undercount")
    table = releases_table(reports, "finding_align_undercount")
    assert "| vLLM 0.33.0 | stall at 7: `unpromotable` | pass | 8 | 8 |" in table
    body = issue_body(finding, reports, text, {"0.33.0": PATCH.read_text()})
    headings = [line for line in body.splitlines() if line.startswith("#")]
    assert headings[:3] == [
        "# [Bug]: Mamba `align`: the admission counts one state block, promotion needs two",
        "### Your current environment",
        "### 🐛 Describe the bug",
    ]
    assert headings[-1] == "### Before submitting a new issue..."
    for part in ("#### Minimal case", "#### Unit test", "#### Affected releases"):
        assert part in headings
    assert "name: finding_align_undercount" in body  # the case file itself
    assert "def test_align_async_load_that_cannot_be_promoted_is_not_admitted" in body
    assert "+    def get_num_blocks_to_promote(" in body
    assert "vLLM: 0.33.0" in body
    assert "](findings/" not in body  # links relative to the doc lead nowhere in an issue
    assert "](https://github.com/vllm-project/vllm/pull/46892)" in body


def test_an_unknown_finding_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["finding", "nine"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("matrix finding: no finding 'nine'")
    assert "\n" not in err
