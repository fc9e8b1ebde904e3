"""The README and the docs name files of the repository only: every relative link resolves to
a file or folder that exists inside it, and no path in backticks leads out of it (a reader has
a clone, nothing beside it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
UP = re.compile(r"`(?:[^`\n]* )?((?:\.\./)+[^`\s]*)")  # a path upwards, in backticks
FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)  # examples: paths of a case file


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_a_doc_names_files_of_the_repository_only(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    for target in LINK.findall(text):
        path = target.split("#")[0]
        if not path or re.match(r"[a-z]+:", path):  # a web page, or this page's anchor
            continue
        resolved = (doc.parent / path).resolve()
        assert resolved.is_relative_to(REPO), f"{target}: outside the repository"
        assert resolved.exists(), f"{target}: no such file"
    for path in UP.findall(FENCED.sub("", text)):  # as a command in the clone's root reads it
        resolved = (REPO / path).resolve()
        assert resolved.is_relative_to(REPO), f"`{path}`: outside the repository"
