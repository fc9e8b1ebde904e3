"""The findings as ``docs/findings.md`` states them, read back for ``python -m matrix finding``:
each finding's section (its number, title, case file, and the paragraphs its bold labels open)
and its patch for a release (the fix with its test in vLLM's tree). Pure: works on text.

A section is ``## N. Title``; it links its case file (``findings/NAME.yaml``, which names the
finding on the command line), and its paragraphs open with a bold label (``**Observed.**``,
``**Where.**``): a paragraph runs to the next bold label, lists and code included. The labels
a maintainer reads are in vLLM's words; ``**In the matrix.**`` is this project's own account.
A section under another (``### N. Title``) is a finding too. A patch
(``docs/findings/patches/vllm-X/N-name.patch``) opens with its description, whose ``Test:
tests/v1/...py`` line and ``(test_name...)`` after it name the tests it adds to vLLM's tree; the
doc's table of the patches names each one's finding (``| `N-name.patch` | finding |``), and a
finding the table does not name has the patch of its own number, if any. A finding reported in
another's issue (one miscount, one fix) says so: ``**Issue.** N``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from matrix.case.shipped import PACKAGE, PATCHES

REPO = PACKAGE.parent
DOC = REPO / "docs" / "findings.md"

_SECTION = re.compile(r"^###? (\d+)\. (.+)$", re.M)
_LABEL = re.compile(r"^\*\*([^*]+?)\.?\*\*")
_CASE = re.compile(r"\(findings/([a-z0-9_]+)\.yaml\)")
_YAML = re.compile(r"```yaml\n(.*?)```", re.S)
_URL = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/(?:pull|issues)/\d+")
_SEVERITY = re.compile(r"^`([a-z_]+)`")
# A patch's ``Test: tests/...py`` line, then its tests' names in parentheses.
_TEST = re.compile(r"^Test: (tests/\S+\.py)\n\(([^)]*)\)", re.M)
_TEST_NAME = re.compile(r"\btest_\w+")
# ``**Issue.** 3``: a finding reported in another's issue (one miscount, one fix).
_ISSUE_OF = re.compile(r"^(\d+)\b")
_FILE = re.compile(r"^diff --git a/(\S+) ", re.M)
# A row of the table of the patches: | `5-name.patch` | 6 | ...
_PATCH_ROW = re.compile(r"^\| `(\d+-[a-z0-9-]+)\.patch` \| (\d+) \|", re.M)


class FindingError(Exception):
    """A finding that is not in the doc, or a doc the reader cannot use; one line."""


@dataclass(frozen=True)
class Finding:
    """One finding's section of docs/findings.md."""

    number: int
    title: str
    name: str  # its case file's stem under docs/findings/
    case_yaml: str  # the case file as the section quotes it
    paragraphs: dict[str, str] = field(default_factory=dict)  # bold label -> text
    patch: str | None = None  # its patch's name without ``.patch`` (the doc's table), if named

    def paragraph(self, *labels: str) -> str:
        """The first of ``labels`` the section has (its text without the label), or ""."""
        for label in labels:
            if label in self.paragraphs:
                return self.paragraphs[label]
        return ""

    @property
    def thread(self) -> str | None:
        """The upstream thread the finding belongs on (``**Thread.**``): a comment there, not
        an issue of its own; None for an issue."""
        found = _URL.search(self.paragraph("Thread"))
        return found.group(0) if found else None

    @property
    def pull_request(self) -> bool:
        """Whether the finding is filed as a pull request of its patch (``**Pull request.**``):
        a cleanup, not a bug report."""
        return bool(self.paragraph("Pull request"))

    @property
    def reported_with(self) -> int | None:
        """The finding whose issue reports this one too (``**Issue.** N``), or None."""
        found = _ISSUE_OF.match(self.paragraph("Issue"))
        return int(found.group(1)) if found else None

    @property
    def severity(self) -> str | None:
        """The severity the matrix gives the failure (``**Severity.**`` opens with it); None
        where the engine is not affected (no measured table then)."""
        found = _SEVERITY.match(self.paragraph("Severity"))
        return found.group(1) if found else None


@dataclass(frozen=True)
class Patch:
    """A finding's fix for one release, as a patch to its source with a test in its tree."""

    path: Path
    version: str
    description: str  # the text before the first file's diff
    test_file: str  # the tests' file in vLLM's tree
    test_names: tuple[str, ...]  # the tests' names (or prefixes of them)
    test_code: str  # the functions the patch adds to the test file (not its imports)

    @property
    def selector(self) -> str:
        """pytest's ``-k`` for the patch's tests."""
        names = " or ".join(self.test_names)
        return names if len(self.test_names) == 1 else f'"{names}"'


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
    patches = {int(number): stem for stem, number in _PATCH_ROW.findall(text)}
    findings = []
    for index, start in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
        body = text[start.end() : end].split("\n## ", 1)[0]
        case = _CASE.search(body)
        quoted = _YAML.search(body)
        if not case or not quoted:
            continue
        findings.append(
            Finding(
                number=int(start.group(1)),
                title=start.group(2).strip(),
                name=case.group(1),
                case_yaml=quoted.group(1),
                paragraphs=_paragraphs(body),
                patch=patches.get(int(start.group(1))),
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


def patched_versions(root: Path = PATCHES) -> list[str]:
    """The releases the patches are for, newest last (``patches/vllm-X/``)."""
    folders = [p.name.removeprefix("vllm-") for p in root.glob("vllm-*") if p.is_dir()]
    return sorted(folders, key=lambda v: tuple(int(n) for n in re.findall(r"\d+", v)))


def read_patch(path: Path, version: str) -> Patch:
    """The patch at ``path`` for vLLM ``version``: its description and the test it adds."""
    text = path.read_text(encoding="utf-8")
    description, _, _ = text.partition("\ndiff --git ")
    named = _TEST.search(description)
    if not named:
        raise FindingError(f"{path.name}: no 'Test: tests/...py' line naming its test")
    test_file, named_tests = named.groups()
    test_names = tuple(dict.fromkeys(_TEST_NAME.findall(named_tests)))
    added: list[str] = []
    for part in re.split(r"(?=^diff --git )", text, flags=re.M):
        file = _FILE.match(part)
        if not file or file.group(1) != test_file:
            continue
        for hunk in re.split(r"^@@[^\n]*\n", part, flags=re.M)[1:]:
            lines = [line[1:] for line in hunk.splitlines() if line.startswith("+")]
            if any(line.startswith(("def ", "@")) for line in lines):  # not an import hunk
                added.append("\n".join(lines).strip("\n"))
    code = "\n# ...\n".join(added)
    return Patch(path, version, description.strip(), test_file, test_names, code)


def finding_patch(finding: Finding, version: str, root: Path = PATCHES) -> Patch | None:
    """The finding's patch for ``version`` (the one the doc's table names, else
    ``N-*.patch``), or None."""
    name = f"{finding.patch}.patch" if finding.patch else f"{finding.number}-*.patch"
    found = sorted((root / f"vllm-{version}").glob(name))
    return read_patch(found[0], version) if found else None
