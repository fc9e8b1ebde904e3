"""The HTML page: one self-contained file (no script, no external file) holding the report's
document, every table (the case table's cells coloured by severity) and every picture, the
pictures embedded as SVG data URLs. A table of contents links every part; each part's heading
has an id and a link to itself, and each row of the case table an anchor (``#case-<id>``), so
a part or a case's row can be linked. Pure."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from urllib.parse import quote

from matrix.judge.result import CellResult
from matrix.report.document import Bullets, CellPictures, Image, Item, Part, Shaded, document
from matrix.report.gallery import SHADES, Picture
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
a.anchor { color: #8c959f; text-decoration: none; margin-left: 0.3em; font-weight: normal; }
td a.anchor { margin: 0 0.3em 0 0; } :target { outline: 2px solid #0969da; }
nav ul { columns: 2; margin: 0.3em 0; }
figure { margin: 0.8em 0; } figcaption { font-size: 0.9em; color: #57606a; }
"""


def shade_class(key: str) -> str:
    """A shade's CSS class: ``pass, tolerated`` -> ``s-pass-tolerated``."""
    return "s-" + re.sub(r"[^a-z]+", "-", key)


def _on(colour: str) -> str:
    """Black or white text, whichever reads on ``colour`` (``#rrggbb``)."""
    red, green, blue = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return "#fff" if 0.299 * red + 0.587 * green + 0.114 * blue < 0.5 else "#1f2328"


# The heat map's colours for the case table's cells (after the striped rows' rule).
STYLE += "".join(
    f"table td.{shade_class(key)} {{ background: {colour}; color: {_on(colour)}; }}\n"
    for key, colour in SHADES.items()
)

Draw = Callable[[Picture], str]


def _text(text: str) -> str:
    """A line of the document's Markdown-like text as HTML: `code` and **strong**."""
    escaped = html.escape(text, quote=False)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)


def _link(anchor: str) -> str:
    """A link to ``anchor`` (an element's id), shown as ``#``."""
    return f'<a class="anchor" href="#{html.escape(quote(anchor, safe=""))}">#</a>'


def case_anchor(case: str) -> str:
    """The id of a case's row in the case table (a case id has no space; one would break an
    id, so it cannot)."""
    return "case-" + re.sub(r"\s", "_", case)


def _table(
    header: list[str],
    rows: list[list[str]],
    shades: Sequence[Sequence[str]] = (),
    cases: Sequence[str] = (),
) -> str:
    """A table; ``shades``: each row's cells after the first by their shade's class;
    ``cases``: each row's case, its anchor."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for index, row in enumerate(rows):
        classes = ["", *(f' class="{shade_class(k)}"' for k in shades[index])] if shades else []
        cells = [
            f"<td{classes[i] if classes else ''}>{html.escape(cell)}</td>"
            for i, cell in enumerate(row)
        ]
        anchor = case_anchor(cases[index]) if cases else ""
        if anchor:
            cells[0] = f"<td>{_link(anchor)}{html.escape(row[0])}</td>"
        opened = f'<tr id="{html.escape(anchor)}">' if anchor else "<tr>"
        body.append(opened + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


# What an SVG needs escaped in a data URL inside a single-quoted attribute: the URL's own
# escape, its fragment mark and the line breaks a URL drops, then the attribute's quote and
# entities. A third smaller than base64.
_IN_URL = str.maketrans(
    {"%": "%25", "#": "%23", "\n": "%0A", "\r": "%0D", "&": "&amp;", "'": "&#39;"}
)


def svg_data_url(svg: str) -> str:
    """The SVG as a ``data:`` URL for a single-quoted ``src`` attribute."""
    return "data:image/svg+xml," + svg.translate(_IN_URL)


def _figure(picture: Picture, draw: Draw) -> str:
    title = html.escape(picture.title)
    return (
        f"<figure><img alt=\"{title}\" src='{svg_data_url(draw(picture))}'>"
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
    if isinstance(item, Shaded):
        return _table(*item.table, item.shades, item.cases)
    return _table(*item)


def part_anchors(parts: Sequence[Part]) -> list[str]:
    """Each part's id: its title in lower case, words joined by ``-``, a count in brackets
    left out (``Failing cells (12)`` is ``failing-cells``, run after run); a second part of
    the same id numbered."""
    bases: list[str] = []
    anchors = []
    for part in parts:
        words = re.sub(r"\s*\(\d+\)$", "", part.title).lower()
        base = re.sub(r"[^a-z0-9]+", "-", words).strip("-") or "part"
        taken = bases.count(base)
        bases.append(base)
        anchors.append(f"{base}-{taken + 1}" if taken else base)
    return anchors


def _part(part: Part, anchor: str, draw: Draw) -> str:
    body = "".join(_item(item, draw) for item in part.items)
    title = _text(part.title) + _link(anchor)
    if part.folded:
        return f'<details id="{anchor}"><summary>{title}</summary>{body}</details>'
    return f'<h2 id="{anchor}">{title}</h2>{body}'


def _contents(parts: Sequence[Part], anchors: Sequence[str]) -> str:
    """The table of contents: a link to each part."""
    links = "".join(
        f'<li><a href="#{anchor}">{_text(part.title)}</a></li>'
        for part, anchor in zip(parts, anchors, strict=True)
    )
    return f'<nav id="contents"><strong>Contents</strong><ul>{links}</ul></nav>'


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
    anchors = part_anchors(doc.parts)
    parts = "\n".join(
        _part(part, anchor, drawing) for part, anchor in zip(doc.parts, anchors, strict=True)
    )
    opening = "".join(f"<p>{_text(line)}</p>" for line in doc.opening)
    contents = _contents(doc.parts, anchors)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{title}</title><style>{STYLE}</style></head>\n"
        f"<body><h1>{title}</h1>{opening}\n{contents}\n{parts}\n</body></html>\n"
    )
