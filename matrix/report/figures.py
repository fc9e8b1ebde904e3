"""What every picture shares: matplotlib's settings (a fixed ``svg.hashsalt``, no date, text
as text: the same inputs give the same file), the figure's frame, legends and patches, and the
SVG text made smaller. With ``pictures`` and ``cell_pictures``, the only modules importing
matplotlib (an optional extra)."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

from matrix.judge.result import CellResult

_GEOMETRY = re.compile(r'\b(d|x|y|width|height|transform)="[^"]*"')
_DECIMALS = re.compile(r"(\d\.\d\d)\d+")
_BETWEEN_TAGS = re.compile(r">\s+<")  # the indentation: no text is whitespace alone
SMALL = 5.5  # a label's font size (points)
# A fixed salt for the SVG's ids, text as text (not glyph paths): the same file each time; one
# font family named, not matplotlib's list of ten on every label (a fifth of the file).
_STYLE: Any = {
    "svg.hashsalt": "vllm-kv-matrix",
    "svg.fonttype": "none",
    "font.size": 8.0,
    "font.sans-serif": ["DejaVu Sans"],
}


def svg(drawing: Any, cells: list[CellResult], release: str) -> str:
    """What ``drawing`` draws of the cells on a fresh figure, as SVG text."""
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_STYLE):
        figure = Figure()  # laid out by hand: a layout engine costs a second a picture
        drawing(figure, cells, release)
        out = io.StringIO()
        no_metadata = {"Date": None, "Creator": None, "Format": None, "Type": None}
        figure.savefig(out, format="svg", metadata=no_metadata)
    # Hundredths of a point are finer than any screen, and the indentation is for no one:
    # the file is a third smaller.
    svg = out.getvalue()
    svg = _GEOMETRY.sub(lambda m: re.sub(r"\s+", " ", _DECIMALS.sub(r"\1", m.group(0))), svg)
    return _BETWEEN_TAGS.sub("><", svg)


def frame(figure: Any, size: tuple[float, float], margins: tuple[float, ...]) -> None:
    """The figure's size and its axes' margins (left, right, top, bottom), in inches."""
    width, height = size
    left, right, top, bottom = margins
    figure.set_size_inches(width, height)
    figure.subplots_adjust(
        left=left / width, right=1 - right / width, top=1 - top / height, bottom=bottom / height
    )


def title(figure: Any, text: str) -> None:
    """The figure's title, a fixed distance below its top edge: matplotlib places it at a
    fraction of the height, which on a tall figure lands on the labels above the axes."""
    figure.suptitle(text, y=1 - 0.08 / figure.get_figheight(), va="top", fontsize=10)


def label_inches(labels: Sequence[str], points: float = SMALL) -> float:
    """About how wide the longest label is, in inches."""
    return 0.15 + 0.6 * points / 72 * max((len(label) for label in labels), default=1)


def legend(figure: Any, handles: list[Any], columns: int) -> float:
    """The legend below the axes; returns the inches it takes."""
    figure.legend(handles=handles, loc="lower center", ncols=columns, frameon=False, fontsize=7)
    return 0.12 + 0.19 * -(-len(handles) // columns)


def patch(colour: str, label: str, hatch: str = "") -> Any:
    """A legend's coloured (and hatched) square."""
    from matplotlib.patches import Patch

    return Patch(facecolor=colour, edgecolor="#555555", hatch=hatch, label=label)
