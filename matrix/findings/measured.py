"""What a finding's body says was measured, in vLLM's words: the environment the tests ran in
(from the release's pins, so a fresh clone states it too) and, from the JSON reports of a run
over the findings' case files, what the release's scheduler did at each pool. Pure: reports
and the pins file in, text out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import yaml

from matrix.case.shipped import FINDINGS
from matrix.findings.doc import REPO, Finding
from matrix.judge.result import CellResult
from matrix.judge.verdict import pool_ranges
from matrix.report.release_reports import ReleaseReport
from matrix.report.tables import render_markdown

# A run's failure kind, as a maintainer reads it (matrix/judge/runs.py recognises each).
KIND_WORDS = {
    "stall": "admitted as an async load, then never scheduled, with nothing running",
    "not_admitted": "never admitted, with nothing running and the pool free",
    "error": "the engine raises",
    "preempted": "preempted and never resumed",
    "leak": "blocks are left allocated after every request finished",
    "protocol": "the scheduler hands the model runner a batch it cannot run as sent",
    "decision": "the scheduler admits or refuses otherwise than its release's own rule",
    "timeout": "the step loop does not return",
}
# Where the findings' own runs write their reports: never the release envs' reports/vllm-X.*.
FINDINGS_REPORTS = Path("reports") / "findings"


def environment(version: str, pins: Path | None = None) -> str:
    """The truth about what ran: the release's Python source, the CPU build of torch the
    scheduler tests ran on (and the one the release declares), no GPU and no model."""
    pins = pins or REPO / "requirements" / f"vllm-{version}.txt"
    text = pins.read_text(encoding="utf-8") if pins.is_file() else ""
    torch = re.search(r"^torch==(\S+)", text, re.M)
    declared = re.search(rf"vLLM {re.escape(version)} declares[\s#]*torch ([\d.]*\d)", text)
    lines = [
        f"vLLM {version} (its Python source as released: the V1 scheduler, KV cache manager "
        "and KV connectors)",
        "CPU only: no GPU and no model weights; VLLM_TARGET_DEVICE=cpu",
    ]
    if torch:
        note = f"; vLLM {version} declares {declared.group(1)}" if declared else ""
        lines.append(f"PyTorch {torch.group(1)}, the CPU build{note}")
    return "\n".join(lines)


def _parameters(case_file: Path) -> dict[str, str]:
    """A case file's matrix parameter names -> the vLLM setting each sets (its path's end)."""
    data = yaml.safe_load(case_file.read_text(encoding="utf-8")) if case_file.is_file() else None
    axes = data.get("matrix", {}) if isinstance(data, dict) else {}
    named = {}
    for name, axis in axes.items() if isinstance(axes, dict) else ():
        path = axis.get("path", name) if isinstance(axis, dict) else name
        named[str(name)] = str(path).rsplit(".", 1)[-1]
    return named


def stock_cells(report: ReleaseReport, case: str) -> list[tuple[str, CellResult]]:
    """The release's own cells of ``case``, and of each of its parameterised forms
    (``case[policy=fail]``), with the parameters as written after the name."""
    found = []
    for cell in report.cells:
        if cell.variant != "stock":
            continue
        if cell.case == case:
            found.append(("", cell))
        elif cell.case.startswith(f"{case}[") and cell.case.endswith("]"):
            found.append((cell.case[len(case) + 1 : -1], cell))
    return found


def _outcome(cell: CellResult, severity: str) -> str:
    failing = [f for f in cell.failures if f.severity == severity]
    if cell.observed == "skip":
        return "not run here"
    if not failing:
        swept = f" from {cell.swept[0]} to {cell.swept[-1]} blocks" if cell.swept else ""
        return f"finishes at every pool{swept}"
    kinds = dict.fromkeys(KIND_WORDS.get(f.kind, f.kind.replace("_", " ")) for f in failing)
    return f"at {pool_ranges([f.pool for f in failing])} blocks: {'; '.join(kinds)}"


def releases_table(finding: Finding, reports: Sequence[ReleaseReport], case: str) -> str:
    """What each release's scheduler did with the finding's case, pool by pool, where the
    failure is the finding's own (its severity); "" when no report ran it or the finding
    leaves the engine unaffected."""
    severity = finding.severity
    if severity is None:
        return ""
    named = _parameters(FINDINGS / f"{finding.name}.yaml")
    rows = []
    for report in reports:
        patched = "-patched-" in report.source  # a tree of matrix.findings.tree's
        label = f"{report.version} with the patches" if patched else report.version
        for parameters, cell in stock_cells(report, case):
            for name, setting in named.items():
                parameters = re.sub(rf"\b{re.escape(name)}=", f"{setting}=", parameters)
            shown = f"{label}, {parameters.replace(',', ', ')}" if parameters else label
            rows.append([shown, _outcome(cell, severity)])
    if not rows:
        return ""
    header = ["vLLM", "the request, by KV cache blocks in the pool (the null block included)"]
    return render_markdown((header, rows))
