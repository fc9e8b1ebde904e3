"""Text that fits a terminal: a table narrower than the width is printed as it is; a wider one
has its cells wrapped where they break well (after a space, ``,``, ``[``, ``-``, ``;``), and
when even that cannot fit, its columns are printed in bands, each repeating the first column.
Prose is wrapped at the width. The width is the terminal's, or 120 columns without one. Pure.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Sequence

from matrix.report.tables import Table, render_text

NO_TERMINAL_WIDTH = 120
GAP = "  "  # between columns, as render_text has it
# The first column (the row's name) keeps at least this share of the width before the other
# columns are put in bands: a case id wrapped into many short lines reads worse than a band.
FIRST_COLUMN_SHARE = 3
_PIECES = re.compile(r"[^ ,\[\-;]*[ ,\[\-;]?")


def terminal_width() -> int:
    """The terminal's width (``COLUMNS`` first, as the shell sets it), or 120 without one."""
    return shutil.get_terminal_size((NO_TERMINAL_WIDTH, 24)).columns


def wrap_cell(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width``, broken after a space, ``,``, ``[``, ``-`` or
    ``;`` where it can be, else within a word."""
    lines = [""]
    for piece in (p for p in _PIECES.findall(text) if p):
        while len(piece) > width:  # nothing to break at: cut it
            room = width - len(lines[-1])
            if room <= 0:
                lines.append("")
                continue
            lines[-1] += piece[:room]
            piece = piece[room:]
        if len(lines[-1]) + len(piece.rstrip()) > width:
            lines.append("")
        lines[-1] += piece
    return [line.rstrip() for line in lines]


def _breakable_width(column: Sequence[str]) -> int:
    """The widest piece of a column that a wrap cannot break."""
    return max((len(p.rstrip()) for cell in column for p in _PIECES.findall(cell)), default=1)


def _render(header: list[str], rows: list[list[str]], widths: list[int]) -> list[str]:
    lines = []
    for index, row in enumerate([header, *rows]):
        cells = [wrap_cell(text, width) for text, width in zip(row, widths, strict=True)]
        if len(cells[0]) > 1 and widths[0] > 1:
            # A wrapped first column continues indented, so it never reads as a new row.
            first = wrap_cell(row[0], widths[0] - 1)
            cells[0] = first[:1] + [" " + line for line in first[1:]]
        for depth in range(max(len(c) for c in cells)):
            parts = [c[depth] if depth < len(c) else "" for c in cells]
            lines.append(GAP.join(p.ljust(w) for p, w in zip(parts, widths, strict=True)).rstrip())
        if index == 0:
            lines.append(GAP.join("-" * w for w in widths))
    return lines


def _widths(columns: list[list[str]], width: int, first_least: int) -> list[int]:
    """Each column's width: its widest cell, the widest shrunk first until the row fits
    (the first column down to ``first_least``, the others to their unbreakable pieces)."""
    widths = [max(len(c) for c in column) for column in columns]
    least = [
        min(w, first_least if i == 0 else _breakable_width(columns[i]))
        for i, w in enumerate(widths)
    ]
    room = width - len(GAP) * (len(widths) - 1)
    while sum(widths) > room:
        shrinkable = [i for i, w in enumerate(widths) if w > max(least[i], 1)]
        if not shrinkable:  # too narrow for whole words: cut them
            shrinkable = [i for i, w in enumerate(widths) if w > 1]
            if not shrinkable:
                break
        widest = max(shrinkable, key=lambda i: widths[i])
        widths[widest] -= 1
    return widths


def fits(lines: list[str], width: int) -> bool:
    """Whether no line is wider than ``width``."""
    return all(len(line) <= width for line in lines)


def fit_table(table: Table, width: int) -> list[str]:
    """The table as text lines of at most ``width`` characters (see the module docstring)."""
    header, rows = table
    columns = [[row[i] for row in [header, *rows]] for i in range(len(header))]
    natural = [max(len(c) for c in column) for column in columns]
    if sum(natural) + len(GAP) * (len(natural) - 1) <= width:
        return render_text(table).splitlines()
    first_least = min(natural[0], max(_breakable_width(columns[0]), width // FIRST_COLUMN_SHARE))
    bands: list[list[int]] = [[]]
    used = first_least
    for index in range(1, len(header)):
        need = len(GAP) + min(natural[index], max(_breakable_width(columns[index]), 1))
        if bands[-1] and used + need > width:
            bands.append([])
            used = first_least
        bands[-1].append(index)
        used += need
    lines: list[str] = []
    for number, band in enumerate(bands):
        picked = [0, *band]
        band_columns = [columns[i] for i in picked]
        widths = _widths(band_columns, width, first_least)
        if len(bands) > 1:
            lines += [""] if number else []
            span = header[band[0]] + (f" to {header[band[-1]]}" if len(band) > 1 else "")
            lines += fit_prose(f"(columns {span})", width)
        lines += _render(
            [header[i] for i in picked], [[row[i] for i in picked] for row in rows], widths
        )
    return lines


def fit_prose(text: str, width: int, indent: str = "") -> list[str]:
    """A paragraph wrapped at ``width``, continuation lines indented two spaces more."""
    return textwrap.wrap(
        text,
        width,
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_on_hyphens=False,
        break_long_words=True,
    ) or [""]
