"""The sections of a results report, in order, each a title, a line saying how to read it and
a table: one list that the terminal summary and the Markdown report both render."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from matrix.judge.result import CellResult
from matrix.report.models import models_table
from matrix.report.tables import Table, case_table, summary_table, tightness_table


@dataclass(frozen=True)
class Section:
    """A titled table, with how to read it (empty when the table says enough)."""

    title: str
    guide: str
    table: Table


def sections(cells: Sequence[CellResult]) -> list[Section]:
    """The report's sections for ``cells``: the upstream summary when cases name columns, the
    models when cases name models, then cases x variants and their tightness."""
    found = []
    if any(cell.column for cell in cells):
        found.append(Section("Summary (the upstream PR's table)", "", summary_table(cells)))
    if any(cell.model for cell in cells):
        found.append(Section("Models", "", models_table(cells)))
    found.append(
        Section(
            "Cases x variants",
            "`FAIL kind` is the observed failure; `(expected ...)` and a leading `!` mark a "
            "cell that differs from the case's expectation.",
            case_table(cells),
        )
    )
    found.append(
        Section(
            "Tightness",
            "Blocks reserved beyond need: the smallest pool from which every size finishes, "
            "minus the fit (0 is tight); `stall` is under-reservation; `unfinished`: the "
            "largest pool swept did not finish.",
            tightness_table(cells),
        )
    )
    return found
