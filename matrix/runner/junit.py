"""The workers' JUnit XML files (pytest's ``--junitxml``, one per worker) as one file: a
``<testsuites>`` holding each worker's ``<testsuite>``, with the totals summed, which CI pages
read as one report."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from pathlib import Path

COUNTED = ("tests", "failures", "errors", "skipped")


def combine_junit(parts: Sequence[Path], into: Path) -> None:
    """Writes ``into``: every test suite of ``parts`` (files that exist) under one root."""
    root = ElementTree.Element("testsuites", {"name": "pytest tests"})
    totals = dict.fromkeys(COUNTED, 0)
    seconds = 0.0
    for part in parts:
        if not part.is_file():
            continue
        tree = ElementTree.parse(part)
        top = tree.getroot()
        suites = [top] if top.tag == "testsuite" else list(top.iter("testsuite"))
        for suite in suites:
            root.append(suite)
            for name in COUNTED:
                totals[name] += int(suite.get(name, "0"))
            seconds += float(suite.get("time", "0"))
    for name, value in totals.items():
        root.set(name, str(value))
    root.set("time", f"{seconds:.3f}")
    into.parent.mkdir(parents=True, exist_ok=True)
    ElementTree.ElementTree(root).write(into, encoding="utf-8", xml_declaration=True)
