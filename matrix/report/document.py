"""A results report as a document: its title and opening lines, then parts (the headline's,
then collapsed ones), each holding paragraphs, bullet lists, tables and pictures. The
Markdown report and the HTML page render this one document, so they say the same. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from matrix.judge.result import CellResult
from matrix.report.gallery import Picture, off_reason
from matrix.report.headline import counts_line, findings, reading_guide
from matrix.report.info import RunInfo
from matrix.report.sections import sections
from matrix.report.tables import Table, mismatches
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


Item = str | Table | Image | Bullets | CellPictures


@dataclass(frozen=True)
class Part:
    """A titled part; ``folded`` ones are collapsed below the headline."""

    title: str
    items: tuple[Item, ...]
    folded: bool = False


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
    (matplotlib is missing), and the report says so."""
    opening = [f"vLLM from the {info.source.describe()}."] if info.source else []
    stock = (
        f"Stock on this release is expected to behave like `{info.ships}`. " if info.ships else ""
    )
    opening.append(stock + counts_line(cells))
    if pictures is None:
        opening.append(f"Pictures are off: {off_reason()}.")
    all_sections = sections(cells)
    parts: list[Part] = []
    for section in (s for s in all_sections if s.headline):
        items: list[Item] = [section.guide] if section.guide else []
        parts.append(Part(section.title, (*items, section.shown)))
    # The findings right after the summary (first when there is none).
    at = 1 if any(c.column for c in cells) else 0
    parts.insert(at, Part("Findings", (Bullets(tuple(findings(cells))),)))
    drawn = list(pictures or ())
    if drawn and drawn[0].name == "severity.svg":
        parts.append(Part("Cases x variants by severity", (Image(drawn[0]),)))
    for section in all_sections:
        if section.brief is not None or not section.headline:
            title = f"{section.title} in full" if section.headline else section.title
            guide: list[Item] = [section.guide] if section.guide else []
            parts.append(Part(title, (*guide, section.table), folded=True))
    strips = tuple(Image(p) for p in drawn if p.model)
    if strips:
        parts.append(Part("Each model's pools", strips, folded=True))
    of_cells = tuple(p for p in drawn if p.cell is not None)
    if of_cells:
        parts.append(
            Part(f"Failing cells ({len(of_cells)})", (CellPictures(of_cells),), folded=True)
        )
    wrong = mismatches(cells)
    if wrong:
        lines = tuple(f"`{c.case}-{c.variant}`: {c.detail}" for c in wrong)
        title = f"Cells that differ from their expectation ({len(wrong)})"
        parts.append(Part(title, (Bullets(lines),), folded=True))
    parts.append(Part("How to read this report", tuple(reading_guide(cells)), folded=True))
    title = f"KV reservation matrix on vLLM {info.vllm_version or 'unknown'}"
    return Document(title, tuple(opening), tuple(parts))


def cell_pictures_line(pictures: Sequence[Picture], folder: str) -> str:
    """What the Markdown says of the failing cells' pictures: where they are and how named."""
    return (
        f"{plural(len(pictures), 'picture')} of failing cells, each at its first failing pool "
        f"and at its fit, are in `{folder}/cells/`, named `<case>-<variants>.svg` (variants "
        "whose runs were the same share one); an `.html` report (`python -m matrix run` writes "
        "one beside this) shows them all."
    )
