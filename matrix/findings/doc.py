"""The findings as ``docs/findings.md`` states them, read back for ``python -m matrix finding``:
each finding's section (its number, title, case file, and the paragraphs its bold labels open),
the evidence table of the patch, and the patch's files a finding names. Pure: works on text.

A section is ``## N. Title``; it links its case file (``findings/NAME.yaml``, which names the
finding on the command line) and its unit test (``findings/test_*.py``), and its paragraphs
open with a bold label (``**What happens.**``, ``**vLLM functions**``): a paragraph runs to
the next bold label, lists and code included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from matrix.case.shipped import PACKAGE

REPO = PACKAGE.parent
DOC = REPO / "docs" / "findings.md"
EVIDENCE_HEADING = "## The fixes as a patch to vLLM"

_SECTION = re.compile(r"^## (\d+)\. (.+)$", re.M)
_LABEL = re.compile(r"^\*\*([^*]+?)\.?\*\*")
_CASE = re.compile(r"\(findings/([a-z0-9_]+)\.yaml\)")
_TEST = re.compile(r"\(findings/(test_[a-z0-9_]+\.py)\)")
_YAML = re.compile(r"```yaml\n(.*?)```", re.S)
_FILE = re.compile(r"^diff --git a/(\S+) ", re.M)


class FindingError(Exception):
    """A finding that is not in the doc, or a doc the reader cannot use; one line."""


@dataclass(frozen=True)
class Finding:
    """One finding's section of docs/findings.md."""

    number: int
    title: str
    name: str  # its case file's stem under docs/findings/
    case_yaml: str  # the case file as the section quotes it
    test: str | None  # its unit test's file name
    paragraphs: dict[str, str] = field(default_factory=dict)  # bold label -> text

    def paragraph(self, *labels: str) -> str:
        """The first of ``labels`` the section has (its text without the label), or ""."""
        for label in labels:
            if label in self.paragraphs:
                return self.paragraphs[label]
        return ""


def _paragraphs(body: str) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    in_code = False
    for line in body.splitlines():
        in_code = in_code != line.startswith("```")
        match = None if in_code else _LABEL.match(line)
        if match:
            current = found.setdefault(match.group(1).strip(), [])
            line = line[match.end() :].lstrip(" .:")
        elif line.startswith("## ") and not in_code:
            current = None
        if current is not None:
            current.append(line)
    return {label: "\n".join(lines).strip() for label, lines in found.items()}


def read_findings(text: str) -> list[Finding]:
    """Every numbered section of the doc that links a case file."""
    starts = list(_SECTION.finditer(text))
    findings = []
    for index, start in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
        body = text[start.end() : end].split("\n## ", 1)[0]
        case = _CASE.search(body)
        quoted = _YAML.search(body)
        if not case or not quoted:
            continue
        test = _TEST.search(body)
        findings.append(
            Finding(
                number=int(start.group(1)),
                title=start.group(2).strip(),
                name=case.group(1),
                case_yaml=quoted.group(1),
                test=test.group(1) if test else None,
                paragraphs=_paragraphs(body),
            )
        )
    return findings


def find(text: str, wanted: str) -> Finding:
    """The finding named ``wanted`` (its case file's stem, or its number)."""
    findings = read_findings(text)
    for finding in findings:
        if wanted in (finding.name, str(finding.number)):
            return finding
    names = ", ".join(f"{f.number} ({f.name})" for f in findings)
    raise FindingError(f"no finding '{wanted}' in {DOC.name} (there are: {names})")


def evidence(text: str) -> str:
    """The section on the patch (its evidence table), up to the next section, or ""."""
    _, heading, rest = text.partition(EVIDENCE_HEADING)
    if not heading:
        return ""
    return rest.split("\n## ", 1)[0].strip()


def patch_files(patch: str, finding: Finding) -> str:
    """The file diffs of ``patch`` whose file the finding's fix names (by file name)."""
    text = finding.paragraph("Fix")
    parts = re.split(r"(?=^diff --git )", patch, flags=re.M)
    kept = []
    for part in parts:
        path = _FILE.match(part)
        if path and re.search(rf"(?<!\w){re.escape(Path(path.group(1)).name)}", text):
            kept.append(part.rstrip("\n"))
    return "\n".join(kept)
