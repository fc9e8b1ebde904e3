"""Tables from cells: case x variant (expected vs observed), tightness, the upstream PR's summary
shape and the described models; rendered as aligned text or Markdown.

Pure: works on :class:`~matrix.judge.result.CellResult` records and returns lists of strings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from matrix.judge.result import CellResult
from matrix.judge.severity import SEVERITY_ORDER
from matrix.judge.tightness import tightness_label
from matrix.outcomes import UNSUPPORTED, Severity
from matrix.variant_names import VARIANT_NAMES, table_label
from matrix.wording import plural

COLUMN_ORDER = (
    "Single group",
    "Multiple groups",
    "Different block sizes",
    "Mamba none",
    "Mamba align",
)


def sort_cells(cells: Iterable[CellResult]) -> list[CellResult]:
    """The cells by case, then variant (the built-ins in their order, then the user's by name)."""
    order: dict[str, int] = {name: index for index, name in enumerate(VARIANT_NAMES)}
    return sorted(cells, key=lambda c: (c.case, order.get(c.variant, len(order)), c.variant))


def variants_of(cells: Sequence[CellResult]) -> list[str]:
    """The variants of ``cells``: the built-ins in their order, then the others by name."""
    present = {c.variant for c in cells}
    return [v for v in VARIANT_NAMES if v in present] + sorted(present - set(VARIANT_NAMES))


def cell_text(cell: CellResult) -> str:
    """A cell in the case table: ``pass``, or its failure kind and how bad it is
    (``stall: unpromotable``), or ``unsupported: <why>``. ``FAIL`` and the expectation mark a
    cell that differs from its case; a failure the case expects is never written as ``FAIL``."""
    if cell.observed == "skip":
        return f"{UNSUPPORTED}: {cell.detail}"
    if cell.observed == "pass":
        text = f"pass, {cell.severity}" if cell.severity else "pass"
    else:
        text = f"{cell.kind}: {cell.severity}" if cell.severity else cell.kind
    if not cell.as_expected:
        wanted = cell.expected_kind or cell.expected
        text = f"{'FAIL ' if cell.observed == 'fail' else ''}{text} (expected {wanted})"
    return text


# A passing cell that refused a request it fits within its case's fit_slack, in a word.
TOLERATED = "pass*"

# The brief form: a severity in a word or two (capitals: an engine hangs or breaks).
BRIEF: dict[Severity, str] = {
    "deadlock": "DEADLOCK",
    "leak": "LEAK",
    "protocol": "PROTOCOL",
    "error": "ERROR",
    "timeout": "TIMEOUT",
    "sizer": "sizer",
    "unpromotable": "unpromotable",
    "over_reservation": "over-reserves",
    "decision": "decides otherwise",
    "expectation": "expectation",
}


def brief_cell_text(cell: CellResult) -> str:
    """A cell in a word (the terminal's case table): ``pass``, ``pass*`` (a tolerated
    over-reservation), its worst severity in brief (else its kind), ``unsupported`` (why:
    :func:`unsupported_notes`); ``FAIL`` and the expectation mark a cell that differs from its
    case, as in :func:`cell_text`."""
    if cell.observed == "skip":
        return UNSUPPORTED
    if cell.observed == "pass":
        text = TOLERATED if cell.severity else "pass"
    else:
        text = BRIEF.get(cell.severity, cell.kind) if cell.severity else cell.kind
    if not cell.as_expected:
        wanted = cell.expected_kind or cell.expected
        text = f"{'FAIL ' if cell.observed == 'fail' else ''}{text} (expected {wanted})"
    return text


def unsupported_notes(cells: Sequence[CellResult]) -> list[str]:
    """Why the unsupported cells could not run, a line a reason with how many cells and one
    of them: what a brief table's ``unsupported`` leaves out."""
    reasons: dict[str, list[CellResult]] = {}
    for cell in sort_cells(c for c in cells if c.observed == "skip"):
        reasons.setdefault(cell.detail, []).append(cell)
    return [
        f"{UNSUPPORTED} ({plural(len(of), 'cell')}, such as {of[0].case}-{of[0].variant}): {reason}"
        for reason, of in reasons.items()
    ]


Table = tuple[list[str], list[list[str]]]


def row_label(case: str, mismatch: bool) -> str:
    """A table row's first cell; ``!`` marks a row with a cell against its expectation."""
    return f"! {case}" if mismatch else case


def _case_by_variant(
    cells: Sequence[CellResult], text: Callable[[CellResult], str], mark_mismatches: bool
) -> Table:
    """One row per case, one column per variant, each cell as ``text`` says (``-``: not run)."""
    variants = variants_of(cells)
    by_case: dict[str, dict[str, CellResult]] = {}
    for cell in sort_cells(cells):
        by_case.setdefault(cell.case, {})[cell.variant] = cell
    rows = []
    for case, row in by_case.items():
        mismatch = mark_mismatches and any(not c.as_expected for c in row.values())
        rows.append(
            [row_label(case, mismatch)] + [text(row[v]) if v in row else "-" for v in variants]
        )
    return ["case", *variants], rows


def case_table(cells: Sequence[CellResult], brief: bool = False) -> Table:
    """Case x variant: what each cell observed (``brief``: in a word); ``!`` marks a row with
    a missed expectation."""
    return _case_by_variant(cells, brief_cell_text if brief else cell_text, mark_mismatches=True)


def tightness_table(cells: Sequence[CellResult]) -> Table:
    """Case x variant: blocks of over-reservation (0 tight), ``stall`` (under-reservation)."""
    return _case_by_variant(
        cells, lambda c: tightness_label(c.kind, c.over_reservation), mark_mismatches=False
    )


def columns_of(cells: Sequence[CellResult]) -> list[str]:
    """The upstream table's columns the cells name, in its order, then any others by name."""
    present = {c.column for c in cells if c.column}
    return [c for c in COLUMN_ORDER if c in present] + sorted(present - set(COLUMN_ORDER))


def column_row(cells: Iterable[CellResult], columns: Sequence[str]) -> list[str]:
    """Each column's verdict over the cells in it (see :func:`column_verdict`), ``-`` if none."""
    cells = list(cells)
    verdicts = []
    for column in columns:
        members = [c for c in cells if c.column == column]
        verdicts.append(column_verdict(members) if members else "-")
    return verdicts


def column_verdict(members: Sequence[CellResult]) -> str:
    """Fail if any member fails, Pass if every member that ran passed, Unsupported if none
    ran."""
    observed = {c.observed for c in members}
    if "fail" in observed:
        return "Fail"
    return "Pass" if "pass" in observed else UNSUPPORTED.capitalize()


def summary_table(cells: Sequence[CellResult], both_names: bool = False) -> Table:
    """Rows are variants, columns the cases' ``column`` labels; a column passes for a variant
    when every case in it that ran passes (see :func:`column_verdict`). Rows keep the upstream
    PR's names (``both_names``: with the variant's own, as the other tables name it,
    ``Original (original)``)."""
    columns = columns_of(cells)
    rows = []
    for variant in variants_of(cells):
        of_variant = [c for c in cells if c.variant == variant]
        label = table_label(variant)
        if both_names and label != variant:
            label = f"{label} ({variant})"
        rows.append([label, *column_row(of_variant, columns)])
    return ["Implementation", *columns], rows


def severity_table(cells: Sequence[CellResult]) -> Table:
    """Rows are worst severities (worst first), then ``no failure`` (cells that ran with no
    failing pool an engine has) and ``unsupported``; columns are variants; each counts the
    cells."""
    variants = variants_of(cells)
    names: list[str] = [s for s in SEVERITY_ORDER if any(c.severity == s for c in cells)]

    def worst(cell: CellResult) -> str:
        if cell.observed == "skip":
            return UNSUPPORTED
        return cell.severity or ("no failure" if cell.observed == "pass" else "fail, no severity")

    extra = ("fail, no severity", "no failure", UNSUPPORTED)
    names += [n for n in extra if any(worst(c) == n for c in cells)]
    rows = []
    for name in names:
        counts = [sum(1 for c in cells if c.variant == v and worst(c) == name) for v in variants]
        rows.append([name, *[str(n) if n else "-" for n in counts]])
    return ["worst severity", *variants], rows


def render_text(table: Table) -> str:
    """The table as aligned plain text, a dashed line under its header."""
    header, rows = table
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def render_markdown(table: Table) -> str:
    """The table as Markdown, ``|`` in its cells escaped."""
    header, rows = table
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def mismatches(cells: Sequence[CellResult]) -> list[CellResult]:
    """The cells whose observation differs from their expectation, sorted."""
    return [c for c in sort_cells(cells) if not c.as_expected]
