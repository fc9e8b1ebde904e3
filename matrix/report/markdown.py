"""The Markdown report: a headline that fits a pull-request comment (what ran, the summary,
the findings, the worst severities, each model's worst in a word, the heat map), then every
full table and picture in collapsed ``<details>`` sections. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from matrix.judge.result import CellResult
from matrix.report.document import (
    Bullets,
    CellPictures,
    Image,
    Item,
    Part,
    cell_pictures_line,
    document,
)
from matrix.report.gallery import Picture
from matrix.report.info import RunInfo
from matrix.report.tables import render_markdown

COMMENT_LIMIT = 65_536  # characters in a GitHub comment


def _item(item: Item, folder: str) -> list[str]:
    if isinstance(item, str):
        return [item]
    if isinstance(item, Bullets):
        return [f"- {line}" for line in item.items]
    if isinstance(item, Image):
        return [f"![{item.picture.title}]({folder}/{item.picture.name})"]
    if isinstance(item, CellPictures):
        return [cell_pictures_line(item.pictures, folder)]
    return [render_markdown(item)]


def _part(part: Part, folder: str) -> list[str]:
    body = [line for item in part.items for line in [*_item(item, folder), ""]]
    if not part.folded:
        return [f"## {part.title}", "", *body]
    # GitHub renders Markdown inside <details> when blank lines surround it.
    return [f"<details><summary>{part.title}</summary>", "", *body, "</details>", ""]


def markdown_report(
    cells: Sequence[CellResult],
    info: RunInfo,
    folder: str = "",
    pictures: Sequence[Picture] | None = (),
) -> str:
    """The results as a Markdown document; ``pictures`` drawn into ``folder`` (relative to
    the report), None when pictures are off (matplotlib is missing)."""
    doc = document(cells, info, pictures)
    head = [f"# {doc.title}", ""]
    for line in doc.opening:
        head += [line, ""]
    for part in doc.parts:
        head += [] if part.folded else _part(part, folder)
    rest = [line for part in doc.parts if part.folded for line in _part(part, folder)]
    while rest and not rest[-1]:
        rest.pop()
    # Said last, from the whole report's size (the line itself included): the headline fits
    # a pull-request comment, the whole may not.
    body = len("\n".join(head + rest)) + 1
    line = _size_line(body)
    for _ in range(3):  # the count's own digits: settled in two rounds
        line = _size_line(body + len(line) + 2)
    return "\n".join([*head, line, "", *rest]) + "\n"


def _size_line(size: int) -> str:
    """Where a pull-request comment should end, given the report's size in characters."""
    if size <= COMMENT_LIMIT:
        return (
            f"The full tables and pictures follow, collapsed: the whole report ({size:,} "
            f"characters) fits a GitHub comment ({COMMENT_LIMIT:,} at most)."
        )
    return (
        f"The full tables and pictures follow, collapsed. The whole report ({size:,} "
        f"characters) is over GitHub's comment limit ({COMMENT_LIMIT:,}): paste up to here."
    )
