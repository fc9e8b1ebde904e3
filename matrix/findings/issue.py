"""``python -m matrix finding NAME``: one finding as what a vLLM maintainer reads: a bug report in
the shape of vLLM's issue template; a pull request's description in vLLM's template for a
finding that is a cleanup (``**Pull request.**``); or, for a finding that belongs on an
existing thread (``**Thread.**``), a comment there. A finding reported in another's issue
(``**Issue.** N``) gives that one's body.

In vLLM's words, under 120 lines: the test first (the one the finding's patch adds to vLLM's
tree, with the command that runs it in a checkout), what is observed and what is expected on
one release (the newest the patches are for), the pools measured (``measured``), where in vLLM
(that release's lines), the reach in a deployment, the threads it relates to and how, and the
fix as a link to its patch; this project's own account stays in docs/findings.md but for the
closing line on how it was found. Writes ``reports/finding-NAME.md``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from matrix.case.shipped import FINDINGS
from matrix.findings.doc import (
    DOC,
    REPO,
    Finding,
    FindingError,
    Patch,
    find,
    finding_patch,
    patched_versions,
    read_findings,
)
from matrix.findings.measured import FINDINGS_REPORTS, environment, releases_table
from matrix.report.release_reports import ReleaseReport, ReportError, load_reports

# A line that starts its own line in Markdown: a list item, a table row, a fence.
_BLOCK_START = re.compile(r"\s*([-*] |\d+\. |\||```)")
FOUND = (
    "How this was found: vllm-kv-matrix (declarative cases run on vLLM's real V1 scheduler, "
    "pool size by pool size), docs/findings.md, finding {number} (`{name}`)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's options."""
    parser.add_argument("name", help="a finding's case file name under docs/findings, or number")
    parser.add_argument(
        "--reports",
        type=Path,
        action="append",
        help=f"folders (or files) of JSON reports of a run over docs/findings (default: "
        f"{FINDINGS_REPORTS} and {FINDINGS_REPORTS / 'patched'})",
    )
    parser.add_argument(
        "--patch-url",
        help="where docs/findings/patches/ is published (a URL the patch's path is appended "
        "to); default: the path in this repository",
    )
    parser.add_argument("--out", type=Path, help="default: reports/finding-NAME.md")


def _words(text: str) -> str:
    """A doc paragraph for the body: lines joined (GitHub wraps them), lists and code kept,
    links relative to the doc dropped (their text stays)."""
    text = re.sub(r"\[([^\]]+)\]\((?!https?:)[^)]*\)", r"\1", text)
    out: list[str] = []
    in_code = False
    for line in text.splitlines():
        fence = line.startswith("```")
        starts = fence or in_code or not line.strip() or _BLOCK_START.match(line)
        previous = out[-1].lstrip() if out else ""
        if previous and not starts and not previous.startswith(("|", "```")):
            out[-1] = f"{out[-1]} {line.strip()}"
        else:
            out.append(line)
        in_code = in_code != fence
    return "\n".join(out)


def _link(patch: Patch, base: str | None) -> str:
    """The patch by name: a link under ``base`` (where the patches are published), else the
    file to attach."""
    name = f"vllm-{patch.version}/{patch.path.name}"
    return f"[{name}]({base.rstrip('/')}/{name})" if base else f"`{name}` (attached)"


def _command(patch: Patch) -> str:
    return f"pytest {patch.test_file} -k {patch.selector}"


def _heads(code: str) -> str:
    """Each test function's head: its decorators, signature and docstring (the body is in the
    patch), so that a body with several tests stays short."""
    kept: list[str] = []
    quotes = 0  # docstring delimiters seen in the current function
    skipping = False
    for line in code.splitlines():
        if line.startswith(("@", "def ", "# ...")):
            if skipping:
                kept.append("    ...")
            skipping, quotes = False, 0
        if skipping:
            continue
        kept.append(line)
        quotes += line.count('"""')
        if quotes >= 2:  # the docstring closed: the rest is in the patch
            skipping, quotes = True, 0
    if skipping:
        kept.append("    ...")
    return "\n".join(kept)


def _test_code(patch: Patch) -> list[str]:
    tests = "The test" if len(patch.test_names) == 1 else "The tests"
    return [
        f"<details><summary>{tests} (in full in the patch)</summary>",
        "",
        f"```python\n{_heads(patch.test_code)}\n```",
        "",
        "</details>",
        "",
    ]


def _test(patch: Patch) -> list[str]:
    what = "A test" if len(patch.test_names) == 1 else f"{len(patch.test_names)} tests"
    fail = "fails there and passes" if len(patch.test_names) == 1 else "fail there and pass"
    return [
        f"**Reproduction.** {what} for vLLM's tree (`{patch.test_file}`), in a "
        f"v{patch.version} checkout with the patch's `tests/` part applied (`git apply "
        f"--include='tests/*' PATCH`), {fail} with the fix:",
        "",
        f"```bash\n{_command(patch)}\n```",
        "",
        *_test_code(patch),
    ]


# vLLM's pull request template: its sections, and its checklist left for whoever opens it.
PR_CHECKLIST = (
    '- [ ] The purpose of the PR, such as "Fix some issue (link existing issues this PR will '
    'resolve)".',
    "- [ ] The test plan, such as providing test command.",
    "- [ ] The test results, such as pasting the results comparison before and after, or e2e "
    "results",
    "- [ ] (Optional) The necessary documentation update, such as updating "
    "`supported_models.md` and `examples` for a new model.",
    "- [ ] (Optional) Release notes update. If your change is user facing, please update the "
    "release notes draft.",
)


def pull_request_body(finding: Finding, patch: Patch) -> str:
    """The finding as the description of a pull request of its patch, in vLLM's template: the
    patch's own description (its numbers included), the related threads, the tests and their
    result."""
    title, _, rest = patch.description.partition("\n")
    purpose = rest.split("\nTest: ", 1)[0].strip()
    parts = [f"# {title}", "", "## Purpose", "", _words(purpose), ""]
    parts += _labelled("Related threads", finding.paragraph("Threads"))
    parts += ["## Test Plan", "", f"```bash\n{_command(patch)}\n```", "", *_test_code(patch)]
    parts += ["## Test Result", "", _words(finding.paragraph("Test result")), ""]
    parts += [
        "---",
        "<details>",
        "<summary> Essential Elements of an Effective PR Description Checklist </summary>",
        "",
        *PR_CHECKLIST,
        "</details>",
        "",
        "---",
        FOUND.format(number=finding.number, name=finding.name),
    ]
    return "\n".join(parts) + "\n"


def _labelled(label: str, text: str) -> list[str]:
    if not text:
        return []
    text = _words(text)
    joined = "\n\n" if _BLOCK_START.match(text) else " "  # a list starts on its own line
    return [f"**{label}.**{joined}{text}", ""]


def _measured(
    finding: Finding, reports: Sequence[ReleaseReport], reported_in_it: Sequence[Finding]
) -> list[str]:
    """The pools measured: the finding's case, then each finding's reported in its issue,
    under its title."""
    parts: list[str] = []
    for shown in (finding, *reported_in_it):
        table = releases_table(shown, reports, case_name(shown))
        if table:
            caption = [] if shown is finding else [f"{shown.title}:", ""]
            parts += [*caption, table, ""]
    if not parts:
        return []
    return ["**Measured**, on vLLM's scheduler driven step by step:", "", *parts]


def issue_body(
    finding: Finding,
    reports: Sequence[ReleaseReport],
    patches: dict[str, Patch],
    patch_url: str | None = None,
    reported_in_it: Sequence[Finding] = (),
) -> str:
    """The finding as a vLLM issue's body, or as a comment on its thread; ``reported_in_it``:
    the findings its issue reports too (``**Issue.** N``), whose pools are measured beside."""
    version = max(patches, key=lambda v: tuple(int(n) for n in v.split("."))) if patches else ""
    patch = patches.get(version)
    if patch is None:
        raise FindingError(f"finding {finding.number} has no patch in docs/findings/patches/")
    if finding.pull_request:
        return pull_request_body(finding, patch)
    # A comment on an open pull request is about its branch: the newest release's change only.
    others = [] if finding.thread else [v for v in patches if v != version]
    parts: list[str] = []
    if finding.thread:
        parts += [
            f"<!-- A comment for {finding.thread} -->",
            f"### {finding.title}",
            "",
            f"Environment: {environment(version).replace(chr(10), '; ')}.",
            "",
        ]
    else:
        parts += [
            f"# [Bug]: {finding.title}",
            "",
            "### Your current environment",
            "",
            f"```text\n{environment(version)}\n```",
            "",
            "### 🐛 Describe the bug",
            "",
        ]
    parts += _labelled("Summary", finding.paragraph("Summary"))
    parts += _test(patch)
    parts += _labelled(f"Observed (v{version})", finding.paragraph("Observed"))
    parts += _labelled("Expected", finding.paragraph("Expected"))
    parts += _measured(finding, reports, reported_in_it)
    parts += _labelled(f"Where (v{version})", finding.paragraph("Where"))
    parts += _labelled("Reach in a deployment", finding.paragraph("Reach in a deployment"))
    parts += _labelled("Related threads", finding.paragraph("Threads"))
    fix = [
        _words(finding.paragraph("Fix")),
        f"The patch, its test{'s' if len(patch.test_names) > 1 else ''} included: "
        f"{_link(patch, patch_url)}",
    ]
    if others:
        links = ", ".join(f"v{v}: {_link(patches[v], patch_url)}" for v in others)
        fix.append(f"(for {links})")
    parts += [f"**Proposed fix.** {' '.join(f for f in fix if f)}", ""]
    parts += _labelled("Cost", finding.paragraph("Cost"))
    if not finding.thread:
        parts += [
            "### Before submitting a new issue...",
            "",
            "- [ ] Make sure you already searched for relevant issues, and asked the chatbot "
            "living at the bottom right corner of the documentation page, which can answer lots "
            "of frequently asked questions.",
            "",
        ]
    parts += ["---", FOUND.format(number=finding.number, name=finding.name)]
    return "\n".join(parts) + "\n"


def case_name(finding: Finding) -> str:
    """The name the finding's case file gives its case (its ``name:``, else its file's)."""
    case_file = FINDINGS / f"{finding.name}.yaml"
    text = case_file.read_text(encoding="utf-8") if case_file.is_file() else finding.case_yaml
    found = re.search(r"^name:\s*(\S+)", text, re.M)
    return found.group(1) if found else finding.name


def _reports(folders: Sequence[Path], named: bool) -> list[ReleaseReport]:
    """The reports in ``folders``; a path the user ``named`` that is no folder is read as a
    report, so a missing one or ``/dev/zero`` is refused in a line, not passed over."""
    files: list[Path] = []
    for path in folders:
        if path.is_dir():
            files += sorted(path.glob("vllm-*.json"))
        elif named:
            files.append(path)
    return [r for f in files for r in load_reports([f]).values()]


def main(options: argparse.Namespace) -> int:
    """Prints and writes the body; 2 when the finding, its patch or a report cannot be read."""
    folders = options.reports or [FINDINGS_REPORTS, FINDINGS_REPORTS / "patched"]
    try:
        text = DOC.read_text(encoding="utf-8")
        finding = find(text, options.name)
        if finding.reported_with is not None:  # one miscount, one issue: the other finding's
            print(
                f"matrix finding: finding {finding.number} is reported in finding "
                f"{finding.reported_with}'s issue",
                file=sys.stderr,
            )
            finding = find(text, str(finding.reported_with))
        patches = {v: p for v in patched_versions() if (p := finding_patch(finding, v))}
        reports = _reports(folders, named=options.reports is not None)
        also = [f for f in read_findings(text) if f.reported_with == finding.number]
        body = issue_body(finding, reports, patches, options.patch_url, also)
    except (FindingError, ReportError) as error:
        print(f"matrix finding: {error}", file=sys.stderr)
        return 2
    out = options.out or Path("reports") / f"finding-{finding.name}.md"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(body, encoding="utf-8")
    except OSError as error:  # --out naming a folder, or a file's folder that is a file
        print(f"matrix finding: cannot write {out}: {error}", file=sys.stderr)
        return 2
    print(body, end="")
    if not reports:
        print(
            f"matrix finding: no report in {', '.join(map(str, folders))}, so no measured "
            "table; a run over the findings writes its own (docs/findings.md, 'How to run "
            "them'), never the release's reports/vllm-X.*",
            file=sys.stderr,
        )
    attached = ", ".join(str(p.path.relative_to(REPO)) for p in patches.values())
    print(f"matrix finding: wrote {out} (the patches it names: {attached})", file=sys.stderr)
    return 0
