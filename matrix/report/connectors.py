"""The Connectors table: each connector's cells under each variant, by their worst severity
(shown when a run has cells of any connector but the default, NIXL)."""

from __future__ import annotations

from collections.abc import Sequence

from matrix.case.connector import DEFAULT_CONNECTOR
from matrix.judge.result import CellResult
from matrix.judge.severity import SEVERITY_ORDER
from matrix.outcomes import UNSUPPORTED
from matrix.report.tables import TOLERATED, Table, variants_of


def connector_of(cell: CellResult) -> str:
    """The connector a cell's loads went through (a record without one: the default)."""
    return cell.connector or DEFAULT_CONNECTOR


def worst_words(cells: Sequence[CellResult]) -> str:
    """The worst severity of these cells and how many of those that ran have it: ``no
    failure (12 of 12)``, ``deadlock (1 of 12)``; ``pass* (4 of 8)`` where the worst is a
    refusal the cases tolerate (their ``fit_slack``: the cells pass, and the case table reads
    them ``pass*``); ``unsupported (n)`` when none ran (why: the Cases x variants table);
    ``-`` none."""
    ran = [c for c in cells if c.observed != "skip"]
    if not cells:
        return "-"
    if not ran:
        return f"{UNSUPPORTED} ({len(cells)})"
    failing = [c for c in ran if c.observed == "fail"]
    found = {c.severity for c in failing}
    worst = next((s for s in SEVERITY_ORDER if s in found), None)
    tolerated = [c for c in ran if c.observed == "pass" and c.severity]
    word: str
    if worst is not None:
        word, count = worst, sum(1 for c in failing if c.severity == worst)
    elif failing:
        word, count = "fail, no severity", len(failing)
    elif tolerated:
        word, count = TOLERATED, len(tolerated)
    else:
        word, count = "no failure", len(ran)
    skipped = len(cells) - len(ran)
    return f"{word} ({count} of {len(ran)})" + (f", {skipped} {UNSUPPORTED}" if skipped else "")


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
