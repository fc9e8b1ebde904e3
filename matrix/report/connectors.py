"""The Connectors table: each connector's cells under each variant, by their worst severity
(shown when a run has cells of any connector but the default, NIXL)."""

from __future__ import annotations

from collections.abc import Sequence

from matrix.case.connector import DEFAULT_CONNECTOR
from matrix.judge.result import CellResult
from matrix.judge.severity import SEVERITY_ORDER
from matrix.report.tables import Table, variants_of


def connector_of(cell: CellResult) -> str:
    """The connector a cell's loads went through (a record without one: the default)."""
    return cell.connector or DEFAULT_CONNECTOR


def worst_words(cells: Sequence[CellResult]) -> str:
    """The worst severity of these cells and how many of those that ran have it: ``no
    failure (12 of 12)``, ``deadlock (1 of 12)``; ``skip (n)`` when none ran; ``-`` none."""
    ran = [c for c in cells if c.observed != "skip"]
    if not cells:
        return "-"
    if not ran:
        return f"skip ({len(cells)})"
    found = {c.severity for c in ran}
    worst = next((s for s in SEVERITY_ORDER if s in found), None)
    if worst is None:
        failing = [c for c in ran if c.observed == "fail"]
        word, count = ("fail, no severity", len(failing)) if failing else ("no failure", len(ran))
    else:
        word, count = worst, sum(1 for c in ran if c.severity == worst)
    skipped = len(cells) - len(ran)
    return f"{word} ({count} of {len(ran)})" + (f", {skipped} skipped" if skipped else "")


def connectors_table(cells: Sequence[CellResult]) -> Table:
    """Rows are connectors (the default first), columns variants: the worst severity of the
    connector's cells under the variant."""
    variants = variants_of(cells)
    names = sorted({connector_of(c) for c in cells}, key=lambda n: (n != DEFAULT_CONNECTOR, n))
    rows = []
    for name in names:
        own = [c for c in cells if connector_of(c) == name]
        rows.append([name, *(worst_words([c for c in own if c.variant == v]) for v in variants)])
    return ["Connector", *variants], rows


def has_connectors(cells: Sequence[CellResult]) -> bool:
    """Whether any cell's loads went through another connector than the default."""
    return any(cell.connector for cell in cells)
