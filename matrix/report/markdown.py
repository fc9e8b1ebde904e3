"""The Markdown report: always under GitHub's comment limit, however large the matrix. What ran
and where the full report is (the HTML page and the JSON beside it), then the headline (how to
read it, the summary, the findings, the worst severities, each model's worst in a word, the
heat map), then the full tables and the pictures in collapsed ``<details>`` sections, as many
as fit: a part that would pass the limit is given in brief where it has a brief form, else
replaced by a line saying where it is in full (the parts kept first are the headline's, then
the cells against their expectation, the pictures, the full tables). Pure."""

from __future__ import annotations

from collections.abc import Sequence

from matrix.judge.result import CellResult
from matrix.report.document import (
    Bullets,
    CellPictures,
    Image,
    Item,
    Part,
    Shaded,
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
    if isinstance(item, Shaded):
        return [render_markdown(item.table)]
    return [render_markdown(item)]


def _block(title: str, items: Sequence[Item], folded: bool, folder: str) -> str:
    """A part as Markdown, ending in a blank line."""
    body = [line for item in items for line in [*_item(item, folder), ""]]
    if not folded:
        return "\n".join([f"## {title}", "", *body]) + "\n"
    # GitHub renders Markdown inside <details> when blank lines surround it.
    return "\n".join([f"<details><summary>{title}</summary>", "", *body, "</details>", ""]) + "\n"


def _in_full(folder: str, recorded: bool) -> str:
    """Where a part left out of the Markdown is whole."""
    if not folder:
        return "in the HTML report" + (" and the JSON report" if recorded else "")
    if recorded:
        return f"in `{folder}.html` and `{folder}.json`"
    return f"in `{folder}.html` and the folder `{folder}/`"


def _forms(part: Part, folder: str) -> list[str]:
    """The part's Markdown, longest first: whole, in brief (if it has a brief form), a line."""
    forms = [_block(part.title, part.items, part.folded, folder)]
    where = _in_full(folder, part.recorded)
    if part.brief:
        note = f"In brief, for GitHub's comment limit; in full {where}."
        forms.append(_block(f"{part.title} (in brief)", (note, *part.brief), part.folded, folder))
    limit = f"{COMMENT_LIMIT:,}"
    forms.append(
        f"**{part.title}**: left out for GitHub's comment limit ({limit} characters); "
        f"in full {where}.\n\n"
    )
    return forms


def _links(folder: str, command: str) -> str:
    """The opening's line naming the full report beside this one, and what writes it."""
    if not folder:
        return (
            "The full report: the HTML page (every table and picture) and the JSON (every "
            f"cell's record) that `{command}` writes beside this one."
        )
    return (
        f"The full report, beside this file: [`{folder}.html`]({folder}.html) (one page, every "
        f"table and picture) and [`{folder}.json`]({folder}.json) (every cell's record), as "
        f"`{command}` writes them."
    )


def budgeted(head: str, forms: Sequence[Sequence[str]], order: Sequence[int]) -> list[str]:
    """Each part's form (one of its ``forms``, longest first, the last a line) such that
    ``head`` and the forms stay under :data:`COMMENT_LIMIT`: every part starts at its last
    form, then each in ``order`` takes its longest form that still fits."""
    chosen = [part[-1] for part in forms]
    size = len(head) + sum(map(len, chosen))
    for index in order:
        for form in forms[index][:-1]:
            if size - len(chosen[index]) + len(form) < COMMENT_LIMIT:
                size += len(form) - len(chosen[index])
                chosen[index] = form
                break
    return chosen


def markdown_report(
    cells: Sequence[CellResult],
    info: RunInfo,
    folder: str = "",
    pictures: Sequence[Picture] | None = (),
) -> str:
    """The results as a Markdown document under GitHub's comment limit; ``pictures`` drawn
    into ``folder`` (relative to the report, and the stem of the HTML and JSON reports
    beside it), None when pictures are off (matplotlib is missing)."""
    doc = document(cells, info, pictures)
    links = _links(folder, info.command)
    head = "\n\n".join([f"# {doc.title}", *doc.opening, links]) + "\n\n"
    forms = [_forms(part, folder) for part in doc.parts]
    order = sorted(range(len(doc.parts)), key=lambda i: (doc.parts[i].rank, i))
    text = head + "".join(budgeted(head, forms, order))
    return text.rstrip("\n") + "\n"
