"""``python -m matrix finding NAME``: one finding as the body of a vLLM bug report, in the shape
of vLLM's issue template (its environment, then the bug: what happens, the minimal case, the
unit test, the affected releases with their severity, the lines responsible, the upstream
threads, and the fix as a patch with its evidence).

The words come from docs/findings.md (``finding_doc``), the one place they are stated; the
affected releases from the release envs' JSON reports that ran the finding's case file
(``tox -e vllm033 -- docs/findings``), and, where a patched env ran it, from the patched
tree's; the patch from docs/findings/patches/. Writes ``reports/finding-NAME.md``.
"""

from __future__ import annotations

import argparse
import platform
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from matrix.case.shipped import FINDINGS, PATCHES
from matrix.findings.doc import DOC, REPO, Finding, FindingError, evidence, find
from matrix.findings.doc import patch_files as finding_patch
from matrix.judge.result import CellResult
from matrix.judge.verdict import pool_ranges
from matrix.report.release_reports import ReleaseReport, ReportError, load_reports
from matrix.report.tables import render_markdown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's options."""
    parser.add_argument("name", help="a finding's case file name under docs/findings, or number")
    parser.add_argument(
        "--reports",
        type=Path,
        action="append",
        help="folders of JSON reports that ran the finding's case (default: reports, "
        "reports/patched)",
    )
    parser.add_argument("--out", type=Path, help="default: reports/finding-NAME.md")


def _cells(report: ReleaseReport, case: str) -> dict[str, CellResult]:
    return {c.variant: c for c in report.cells if c.case == case}


def _outcome(cell: CellResult | None) -> str:
    if cell is None:
        return "not run"
    if cell.observed != "fail":
        return cell.observed
    return f"{cell.kind} at {pool_ranges(cell.failing_pools)}: `{cell.severity or 'undersized'}`"


def releases_table(reports: Sequence[ReleaseReport], case: str) -> str:
    """Stock and ``proposed`` on every report that ran ``case``: outcome, fit, startable."""
    rows = []
    for report in reports:
        cells = _cells(report, case)
        if not cells:
            continue
        stock = cells.get("stock")
        known = stock or next(iter(cells.values()))
        startable = "-" if known.startable is None else str(known.startable)
        # A tree of matrix.findings.tree's (vllm-X-patched-<digest>): the patch, named.
        patched = "-patched-" in report.source
        label = f"vLLM {report.version} with the patch" if patched else report.label
        rows.append(
            [
                label,
                _outcome(stock),
                _outcome(cells.get("proposed")),
                str(known.fit),
                startable,
            ]
        )
    if not rows:
        return (
            f"(No report ran case `{case}`: run `tox -e vllm033 -- docs/findings`, and as "
            "much for each release, then this command again.)"
        )
    header = ["vLLM", "stock", "`proposed`", "fit", "startable"]
    return render_markdown((header, rows))


def environment(reports: Sequence[ReleaseReport]) -> str:
    """What ran: the releases, the lean CPU install (torch pin), Python and the platform."""
    versions = sorted({r.version for r in reports if not r.source})
    torch = set()
    for version in versions:
        pins = REPO / "requirements" / f"vllm-{version}.txt"
        if pins.is_file():
            torch.update(re.findall(r"^torch==(\S+)", pins.read_text(), re.M))
    return "\n".join(
        [
            f"vLLM: {', '.join(versions) or 'see the table below'} (the scheduler's Python "
            "code: no model, no GPU)",
            f"PyTorch: {', '.join(sorted(torch)) or 'unknown'} (CPU build)",
            f"Python: {platform.python_version()}",
            f"OS: {platform.system()} {platform.machine()}",
            "Install: each release's lean CPU env (vllm-kv-matrix, docs/install.md); the "
            "scheduler, KV cache manager and NIXL connector are vLLM's own, remote prefills "
            "simulated.",
        ]
    )


def _words(text: str) -> str:
    """The doc's words for a report: who measured a figure is this project's bookkeeping, and
    a link relative to the doc leads nowhere in an issue (its text stays)."""
    text = text.replace(" *(lead's)*", "")
    return re.sub(r"\[([^\]]+)\]\((?!https?:)[^)]*\)", r"\1", text)


def _section(title: str, text: str) -> list[str]:
    return [f"#### {title}", "", _words(text), ""] if text else []


def issue_body(
    finding: Finding, reports: Sequence[ReleaseReport], doc_text: str, patches: dict[str, str]
) -> str:
    """The finding as a vLLM bug report's body."""
    case_file = FINDINGS / f"{finding.name}.yaml"
    case_text = case_file.read_text() if case_file.is_file() else finding.case_yaml
    case = yaml.safe_load(case_text)
    case_name = str(case.get("name", finding.name)) if isinstance(case, dict) else finding.name
    parts = [
        f"# [Bug]: {finding.title}",
        "",
        "### Your current environment",
        "",
        "<details>",
        "<summary>The environment the findings were measured in</summary>",
        "",
        "```text",
        environment(reports),
        "```",
        "",
        "</details>",
        "",
        "### 🐛 Describe the bug",
        "",
        _words(finding.paragraph("What happens")),
        "",
    ]
    parts += _section("Reach in a deployment", finding.paragraph("Reach in a deployment"))
    parts += [
        "#### Minimal case",
        "",
        f"vllm-kv-matrix's case file `docs/findings/{finding.name}.yaml`, run on vLLM's real "
        f"scheduler with `pytest docs/findings/{finding.name}.yaml`:",
        "",
        "```yaml",
        case_text.rstrip("\n"),
        "```",
        "",
    ]
    if finding.test:
        test = (FINDINGS / finding.test).read_text()
        parts += ["#### Unit test", "", _folded(finding.test, test, "python"), ""]
    parts += ["#### Affected releases", "", releases_table(reports, case_name), ""]
    parts += _section("Severity", finding.paragraph("Severity"))
    parts += _section("Releases", finding.paragraph("Releases"))
    parts += _section("Where in vLLM", finding.paragraph("vLLM functions"))
    parts += _section("Related upstream threads", finding.paragraph("Upstream"))
    parts += _section("Proposed fix", finding.paragraph("Fix"))
    if patches:  # the newest release's, in full for this finding's files
        version = max(patches)
        diff = finding_patch(patches[version], finding)
        others = ", ".join(f"`docs/findings/patches/vllm-{v}.patch`" for v in patches)
        if diff:
            parts += [_folded(f"the patch on vLLM {version} ({others})", diff, "diff"), ""]
    parts += _section("Evidence for the patch", evidence(doc_text))
    parts += [
        "### Before submitting a new issue...",
        "",
        "- [x] Make sure you already searched for relevant issues, and asked the chatbot "
        "living at the bottom right corner of the documentation page, which can answer lots "
        "of frequently asked questions.",
        "",
    ]
    return "\n".join(parts)


def _folded(summary: str, text: str, language: str) -> str:
    return (
        f"<details>\n<summary>{summary}</summary>\n\n```{language}\n{text.rstrip()}\n```\n\n"
        "</details>"
    )


def main(options: argparse.Namespace) -> int:
    """Prints and writes the issue body; 2 when the finding or a report cannot be read."""
    try:
        doc_text = DOC.read_text(encoding="utf-8")
        finding = find(doc_text, options.name)
        folders = options.reports or [Path("reports"), Path("reports") / "patched"]
        files = [f for d in folders if d.is_dir() for f in sorted(d.glob("vllm-*.json"))]
        reports = [r for f in files for r in load_reports([f]).values()]
    except (FindingError, ReportError) as error:
        print(f"matrix finding: {error}", file=sys.stderr)
        return 2
    patches = {
        p.stem.removeprefix("vllm-"): p.read_text() for p in sorted(PATCHES.glob("vllm-*.patch"))
    }
    body = issue_body(finding, reports, doc_text, patches)
    out = options.out or Path("reports") / f"finding-{finding.name}.md"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(body, encoding="utf-8")
    except OSError as error:  # --out naming a folder, or a file's folder that is a file
        print(f"matrix finding: cannot write {out}: {error}", file=sys.stderr)
        return 2
    print(body)
    print(f"matrix finding: wrote {out}", file=sys.stderr)
    return 0
