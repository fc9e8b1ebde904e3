"""The HTML page: one self-contained file (no script, no external file) holding the report's
document, every table and every picture, the pictures embedded as SVG data. Pure."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable, Sequence

from matrix.judge.result import CellResult
from matrix.report.document import Bullets, CellPictures, Image, Item, Part, document
from matrix.report.gallery import Picture
from matrix.report.info import RunInfo

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 78em;
       padding: 0 1em; color: #1f2328; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 12.5px; }
th, td { border: 1px solid #d0d7de; padding: 2px 7px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; position: sticky; top: 0; }
tr:nth-child(even) td { background: #fafbfc; }
code { background: #eff1f3; padding: 0 3px; border-radius: 3px; font-size: 0.92em; }
details { margin: 0.7em 0; } summary { cursor: pointer; font-weight: 600; font-size: 1.1em; }
img { max-width: 100%; display: block; margin: 0.5em 0; }
figure { margin: 0.8em 0; } figcaption { font-size: 0.9em; color: #57606a; }
"""

Draw = Callable[[Picture], str]


def _text(text: str) -> str:
    """A line of the document's Markdown-like text as HTML: `code` and **strong**."""
    escaped = html.escape(text, quote=False)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(picture: Picture, draw: Draw) -> str:
    data = base64.b64encode(draw(picture).encode()).decode()
    title = html.escape(picture.title)
    return (
        f'<figure><img alt="{title}" src="data:image/svg+xml;base64,{data}">'
        f"<figcaption>{title}</figcaption></figure>"
    )


def _cells(pictures: Sequence[Picture], draw: Draw) -> str:
    """The failing cells' pictures, collapsed per case."""
    by_case: dict[str, list[Picture]] = {}
    for picture in pictures:
        assert picture.cell is not None
        by_case.setdefault(picture.cell.case, []).append(picture)
    return "".join(
        f"<details><summary>{html.escape(case)} ({len(group)})</summary>"
        + "".join(_figure(p, draw) for p in group)
        + "</details>"
        for case, group in by_case.items()
    )


def _item(item: Item, draw: Draw) -> str:
    if isinstance(item, str):
        return f"<p>{_text(item)}</p>"
    if isinstance(item, Bullets):
        return "<ul>" + "".join(f"<li>{_text(line)}</li>" for line in item.items) + "</ul>"
    if isinstance(item, Image):
        return _figure(item.picture, draw)
    if isinstance(item, CellPictures):
        return _cells(item.pictures, draw)
    return _table(*item)


def _part(part: Part, draw: Draw) -> str:
    body = "".join(_item(item, draw) for item in part.items)
    title = _text(part.title)
    if part.folded:
        return f"<details><summary>{title}</summary>{body}</details>"
    return f"<h2>{title}</h2>{body}"


def html_page(
    cells: Sequence[CellResult],
    info: RunInfo,
    pictures: Sequence[Picture] | None = (),
    draw: Draw | None = None,
) -> str:
    """The report as one self-contained HTML page; ``draw`` gives each picture's SVG (None
    ``pictures``: pictures are off, matplotlib is missing)."""
    doc = document(cells, info, pictures if draw or pictures is None else ())
    drawing: Draw = draw or (lambda picture: "")
    title = html.escape(doc.title)
    parts = "\n".join(_part(part, drawing) for part in doc.parts)
    opening = "".join(f"<p>{_text(line)}</p>" for line in doc.opening)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{title}</title><style>{STYLE}</style></head>\n"
        f"<body><h1>{title}</h1>{opening}\n{parts}\n</body></html>\n"
    )
