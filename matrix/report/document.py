"""A results report as a document: its title and opening lines, then parts (the headline's,
then collapsed ones), each holding paragraphs, bullet lists, tables and pictures. The
Markdown report and the HTML page render this one document, so they say the same. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from matrix.case.limits import MAX_PICTURES
from matrix.judge.result import CellResult
from matrix.outcomes import UNSUPPORTED
from matrix.report.gallery import Picture, left_out, off_reason, shade
from matrix.report.headline import counts_line, findings, reading_guide
from matrix.report.info import RunInfo
from matrix.report.sections import Section, sections
from matrix.report.tables import Table, mismatches, sort_cells, variants_of
from matrix.wording import plural


@dataclass(frozen=True)
class Image:
    """A picture in the document: its file in the pictures folder, and what it shows."""

    picture: Picture


@dataclass(frozen=True)
class Bullets:
    """A bullet list."""

    items: tuple[str, ...]


@dataclass(frozen=True)
class CellPictures:
    """Every failing cell's picture: the Markdown names their folder, the page shows them."""

    pictures: tuple[Picture, ...]


@dataclass(frozen=True)
class Shaded:
    """A table whose cells after the first column are coloured, each by a key of
    :data:`~matrix.report.gallery.SHADES` (the page colours them; the Markdown cannot); a row
    a case, ``cases`` naming each (the page gives each row an anchor)."""

    table: Table
    shades: tuple[tuple[str, ...], ...]
    cases: tuple[str, ...] = ()


Item = str | Table | Image | Bullets | CellPictures | Shaded

# Which parts the Markdown keeps when not all fit a GitHub comment: the lowest rank first,
# in the document's order within a rank (``markdown.COMMENT_LIMIT``).
HEADLINE, DIFFERING, PICTURES, FULL_TABLES = 0, 1, 2, 3


@dataclass(frozen=True)
class Part:
    """A titled part; ``folded`` ones are collapsed below the headline. ``brief``: a shorter
    form for where the whole does not fit; ``rank``: how soon it is left out (the highest
    first); ``recorded``: the JSON report holds it (it comes from the cells' records), not
    only the HTML page and the pictures folder."""

    title: str
    items: tuple[Item, ...]
    folded: bool = False
    brief: tuple[Item, ...] = ()
    rank: int = HEADLINE
    recorded: bool = True


@dataclass(frozen=True)
class Document:
    """The whole report: title, opening lines, parts."""

    title: str
    opening: tuple[str, ...]
    parts: tuple[Part, ...]


def document(
    cells: Sequence[CellResult], info: RunInfo, pictures: Sequence[Picture] | None
) -> Document:
    """The report of ``cells`` with the ``pictures`` drawn for it; None: pictures are off
    (matplotlib is missing), and the report says so. How to read it comes first, then the
    headline's tables and the heat map, then the full tables and the other pictures, folded.
    The cells' order does not matter (a merge gives them shard by shard): the examples the
    text names are the first in the tables' order."""
    cells = sort_cells(cells)
    opening = [f"vLLM from the {info.source.describe()}."] if info.source else []
    if info.selection:  # the suite's own report is a whole run's
        opening.insert(
            0,
            f"**A filtered run** (`{info.selection}`): its cells only, not the whole suite's; "
            f"`{info.command}` without the filter writes the whole report.",
        )
    stock = (
        f"Stock on this release is expected to behave like `{info.ships}`. " if info.ships else ""
    )
    opening.append(stock + counts_line(cells))
    if pictures is None:
        opening.append(f"Pictures are off: {off_reason()}.")
    elif pictures and (left := left_out(cells)):
        opening.append(
            f"{plural(left, 'picture')} more not drawn: a report draws at most "
            f"{MAX_PICTURES:,}, the maps and the models' strips first."
        )
    all_sections = sections(cells)
    parts = [Part("How to read this report", tuple(reading_guide(cells)))]
    for section in (s for s in all_sections if s.headline):
        items: list[Item] = [section.guide] if section.guide else []
        parts.append(Part(section.title, (*items, section.shown)))
    # The findings right after the summary (first when there is none).
    at = 2 if any(c.column for c in cells) else 1
    parts.insert(at, Part("Findings", (Bullets(tuple(findings(cells))),)))
    drawn = list(pictures or ())
    maps = {p.per_case: p for p in drawn if not p.model and p.cell is None}
    if False in maps:
        each = "Each case's cells: Cases x variants, below (on the HTML page coloured alike)."
        parts.append(Part(maps[False].title, (Image(maps[False]), each), recorded=False))
    for section in all_sections:
        if section.brief is not None or not section.headline:
            parts.append(_folded(section, cells))
    if True in maps:
        picture = maps[True]
        parts.append(Part(picture.title, (Image(picture),), True, rank=PICTURES, recorded=False))
    strips = tuple(Image(p) for p in drawn if p.model)
    if strips:
        parts.append(Part("Each model's pools", strips, True, rank=PICTURES, recorded=False))
    of_cells = tuple(p for p in drawn if p.cell is not None)
    if of_cells:
        title = f"Failing cells ({len(of_cells)})"
        parts.append(Part(title, (CellPictures(of_cells),), True, rank=PICTURES, recorded=False))
    wrong = mismatches(cells)
    if wrong:
        lines = tuple(f"`{c.case}-{c.variant}`: {c.detail}" for c in wrong)
        title = f"Cells that differ from their expectation ({len(wrong)})"
        parts.append(Part(title, (Bullets(lines),), True, rank=DIFFERING))
    return Document(info.title(), tuple(opening), tuple(parts))


def _folded(section: Section, cells: Sequence[CellResult]) -> Part:
    """A section's full table, collapsed (the case table coloured by severity), with its
    brief form where it has one and the full one is not in the headline already."""
    title = f"{section.title} in full" if section.headline else section.title
    guide: tuple[Item, ...] = (section.guide,) if section.guide else ()
    table: Item = section.table
    if section.shaded:
        table = Shaded(section.table, case_shades(cells), tuple(sorted_cases(cells)))
    brief: tuple[Item, ...] = ()
    if section.brief is not None and not section.headline:
        brief = (*section.notes, section.brief)
    return Part(title, (*guide, table), True, brief, DIFFERING if section.small else FULL_TABLES)


def sorted_cases(cells: Sequence[CellResult]) -> dict[str, dict[str, CellResult]]:
    """The cells by case and variant, the cases in the case table's order."""
    by_case: dict[str, dict[str, CellResult]] = {}
    for cell in sort_cells(cells):
        by_case.setdefault(cell.case, {})[cell.variant] = cell
    return by_case


def case_shades(cells: Sequence[CellResult]) -> tuple[tuple[str, ...], ...]:
    """Each row of the case table's cells by their shade (``skip`` where a variant did not
    run the case), in the table's order."""
    variants = variants_of(cells)
    by_case = sorted_cases(cells)
    return tuple(
        tuple(shade(row[v]) if v in row else UNSUPPORTED for v in variants)
        for row in by_case.values()
    )


def cell_pictures_line(pictures: Sequence[Picture], folder: str) -> str:
    """What the Markdown says of the failing cells' pictures: where they are and how named."""
    page = f"`{folder}.html`" if folder else "the HTML report"
    return (
        f"{plural(len(pictures), 'picture')} of failing cells, each at its first failing pool "
        f"and at its fit, are in `{folder}/cells/`, named `<case>-<variants>.svg` (variants "
        f"whose runs were the same share one); {page} shows them all."
    )
