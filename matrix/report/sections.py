"""The sections of a results report, in order, each a title, a line saying how to read it and
a table: one list that the terminal summary, the Markdown report and the HTML page all render.

A section may also have a brief form (a word or two a cell) for the terminal and the
Markdown's headline, with notes on what the brief form leaves out; the Markdown keeps every
full table, collapsed below the headline where the section is not part of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from matrix.judge.result import CellResult
from matrix.report.connectors import connectors_table, has_connectors
from matrix.report.costs import cost_details, cost_table, workload_table
from matrix.report.models import model_details, models_table
from matrix.report.registry import architecture_table, class_of, registry_table
from matrix.report.tables import (
    Table,
    case_table,
    severity_table,
    summary_table,
    tightness_table,
    unsupported_notes,
)


@dataclass(frozen=True)
class Section:
    """A titled table, with how to read it (empty when the table says enough)."""

    title: str
    guide: str
    table: Table
    brief: Table | None = None  # a word or two a cell: the headline's, and the terminal's
    notes: tuple[str, ...] = ()  # what the brief form leaves out, a line each
    headline: bool = False  # shown in the Markdown's headline, not collapsed
    # The terminal shows the brief form always, or only where the full table is too wide.
    always_brief: bool = False
    shaded: bool = False  # a case x variant table of the cells: the page colours its cells
    # A few rows (a row a variant, or a workload's pools): the Markdown keeps it before the
    # tables a row a case when not all fit a comment.
    small: bool = False

    @property
    def shown(self) -> Table:
        """The table where space is short (the headline): the brief form, if any."""
        return self.brief or self.table


def sections(cells: Sequence[CellResult]) -> list[Section]:
    """The report's sections for ``cells``: the upstream summary when cases name columns, the
    worst severities, the models when cases name models, then cases x variants and their
    tightness."""
    found = []
    if any(cell.column for cell in cells):
        found.append(
            Section(
                "Summary (the upstream PR's table)",
                "Its rows keep the upstream PR's names, each with the variant's own, as the "
                "other tables name it.",
                summary_table(cells, both_names=True),
                headline=True,
            )
        )
    if has_connectors(cells):
        guide = "Each connector's worst severity, of the cells that ran (docs/connectors.md)."
        found.append(Section("Connectors", guide, connectors_table(cells), headline=True))
    found.append(
        Section(
            "Worst severity per variant",
            "How many cells have each severity as their worst.",
            severity_table(cells),
            headline=True,
        )
    )
    if any(cell.model for cell in cells):
        models = models_table(cells)
        found.append(
            Section(
                "Models",
                "Each model's cells under each variant, by their worst failure (How to read "
                "this report, above, says what each word means).",
                models,
                brief=models_table(cells, brief=True),
                notes=tuple(model_details(models)),
                headline=True,
                always_brief=True,
            )
        )
    found += registry_sections(cells)
    found.append(
        Section(
            "Cases x variants",
            "`FAIL kind` is the observed failure; `(expected ...)` and a leading `!` mark a "
            "cell that differs from the case's expectation.",
            case_table(cells),
            brief=case_table(cells, brief=True),
            notes=(
                "A cell's worst severity (else its failure kind); pass*: passed, refusing within "
                "the case's fit_slack; (expected ...): against the case's expectation (row "
                "marked !).",
                *unsupported_notes(cells),
            ),
            shaded=True,
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
    found += cost_sections(cells)
    return found


def cost_sections(cells: Sequence[CellResult]) -> list[Section]:
    """What each variant costs against stock where both finished (matrix/report/costs.py)."""
    table = cost_table(cells)
    if not table[1]:
        return []
    guide = (
        "At the pools where a cell and its case's stock cell both finished: how many of the "
        "variant's cells took more steps to finish every request (the most more at one pool), "
        "fewer, preempted more, or kept their loads waiting longer for admission."
    )
    details = cost_details(cells)
    workloads = workload_table(cells)
    found = (
        [
            Section(
                "Workloads",
                "Each workload case (a stream of requests at pools from the one vLLM starts "
                "with): the steps to finish every request, the mean and tail (90th percentile) "
                "completion in steps, the preemptions, and the steps against stock's.",
                workloads,
                small=True,
            )
        ]
        if workloads[1]
        else []
    )
    return [
        *found,
        Section("Cost against stock", guide, table, small=True),
        Section(
            "Cost against stock, cell by cell", "Each cell that cost other than stock.", details
        ),
    ]


def registry_sections(cells: Sequence[CellResult]) -> list[Section]:
    """The Registry tables, where the run holds class cells (docs/sweep.md)."""
    if not any(class_of(cell) for cell in cells):
        return []
    return [
        Section(
            "Registry",
            "Each layout class of `python -m matrix sweep`: how many architectures each "
            "release's baseline gives it and which, and each variant's worst severity over the "
            "class's cells (`!`: a cell differs from its expectation).",
            registry_table(cells),
        ),
        Section(
            "Registry architectures",
            "Every architecture of the baselines by name: its layout class, or why it has none.",
            architecture_table(),
        ),
    ]
