"""What every picture shares: matplotlib's settings (a fixed ``svg.hashsalt``, no date, text
as text: the same inputs give the same file), the figure's frame, legends and patches, and the
SVG text made smaller. With ``pictures`` and ``cell_pictures``, the only modules importing
matplotlib (an optional extra)."""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

from matrix.judge.result import CellResult

_GEOMETRY = re.compile(r'\b(d|x|y|width|height|transform)="[^"]*"')
_DECIMALS = re.compile(r"(\d\.\d\d)\d+")
_BETWEEN_TAGS = re.compile(r">\s+<")  # the indentation: no text is whitespace alone
# What matplotlib writes that draws nothing, or the same thing again: the DOCTYPE, an id on
# every group (only clip paths, markers and hatches are referenced), a moveto alone (a marker
# line of no width), a point repeated (each step of a stair), the font on every text, a
# rotation by -0, the spaces in every style.
_DOCTYPE = re.compile(r"<!DOCTYPE[^>]*>\s*")
_GROUP_ID = re.compile(r'<g id="[^"]*"')
_MOVE_ONLY = re.compile(r'<path d="M [-\d.]+ [-\d.]+ "[^>]*/>')
_PATH = re.compile(r' d="([^"]*)"')
_PATH_TOKEN = re.compile(r"[A-Za-z]|[-\d.]+")
_POINTS = {"M": 2, "L": 2, "Q": 4, "C": 6, "z": 0}  # the numbers after each command
_FAMILY = "font-family: 'DejaVu Sans', sans-serif; "
_NO_ROTATION = re.compile(r' transform="rotate\(-0 [^)]*\)"')
_STYLE_ATTRIBUTE = re.compile(r'style="[^"]*"')
_SHEET = "*{stroke-linejoin: round; stroke-linecap: butt}"
_SMALLER_SHEET = (
    "*{stroke-linejoin:round;stroke-linecap:butt}text{font-family:'DejaVu Sans',sans-serif}"
)
_GROUP_TAG = re.compile(r"<g>|<g [^>]*>|</g>")
SMALL = 7.0  # a label's font size (points): about 9 px where a page shows the picture whole
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
    return smaller(out.getvalue())


def smaller(svg: str) -> str:
    """The SVG text without what draws nothing: hundredths of a point are finer than any
    screen, the indentation is for no one, and what ``_DOCTYPE`` to ``_SHEET`` name is
    matplotlib's repetition (the file is about half as large; the picture renders the same,
    pixel for pixel)."""
    svg = _GEOMETRY.sub(lambda m: re.sub(r"\s+", " ", _DECIMALS.sub(r"\1", m.group(0))), svg)
    svg = _BETWEEN_TAGS.sub("><", _DOCTYPE.sub("", svg))
    svg = _GROUP_ID.sub("<g", svg).replace("<g/>", "")
    svg = _PATH.sub(lambda m: f' d="{_path_data(m.group(1))}"', _MOVE_ONLY.sub("", svg))
    svg = _NO_ROTATION.sub("", svg.replace(_FAMILY, "").replace(_SHEET, _SMALLER_SHEET))
    svg = _STYLE_ATTRIBUTE.sub(lambda m: m.group(0).replace(": ", ":").replace("; ", ";"), svg)
    return _bare_groups_opened(svg)


def _path_data(data: str) -> str:
    """A path's data drawn the same, shorter: a line along an axis as ``H``/``V``, a line to
    where it is dropped, no space beside a command letter (matplotlib writes ``M``, ``L``,
    ``Q``, ``C`` and ``z`` with absolute points)."""
    tokens = _PATH_TOKEN.findall(data)
    out: list[str] = []
    here = start = ("", "")
    index = 0
    while index < len(tokens):
        command = tokens[index]
        size = _POINTS.get(command)
        if size is None:
            return data  # not matplotlib's: left as it is
        numbers = tokens[index + 1 : index + 1 + size]
        index += 1 + size
        if command == "L" and len(numbers) == 2:
            x, y = numbers
            if (x, y) == here:
                continue
            out.append(f"H{x}" if y == here[1] else f"V{y}" if x == here[0] else f"L{x} {y}")
        else:
            out.append(command + " ".join(numbers))
        if command in "MLQC" and len(numbers) >= 2:
            here = (numbers[-2], numbers[-1])
            start = here if command == "M" else start
        elif command == "z":
            here = start
    return "".join(out)


def _bare_groups_opened(svg: str) -> str:
    """The SVG with every group that has no attribute left replaced by its contents."""
    kept, bare_or_not, start = [], [], 0
    for tag in _GROUP_TAG.finditer(svg):
        if tag.group(0).startswith("<g "):
            if not tag.group(0).endswith("/>"):
                bare_or_not.append(False)
            continue
        if tag.group(0) == "<g>":
            bare_or_not.append(True)
        elif not bare_or_not.pop():
            continue
        kept.append(svg[start : tag.start()])
        start = tag.end()
    kept.append(svg[start:])
    return "".join(kept)


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


def shapes(axes: Any, shaped: Mapping[str, Sequence[Sequence[tuple[float, float]]]]) -> None:
    """Filled polygons (their corners in data coordinates), one path a colour: a few lines of
    SVG, not an artist (a group, a clip path, a style) a rectangle or a marker."""
    from matplotlib.patches import PathPatch
    from matplotlib.path import Path

    for colour, polygons in shaped.items():
        vertices = [point for polygon in polygons for point in (*polygon, polygon[0])]
        codes = [
            code
            for polygon in polygons
            for code in (Path.MOVETO, *[Path.LINETO] * (len(polygon) - 1), Path.CLOSEPOLY)
        ]
        axes.add_patch(PathPatch(Path(vertices, codes), facecolor=colour, lw=0))


def box(x: float, y: float, width: float, height: float) -> list[tuple[float, float]]:
    """A rectangle's corners, for :func:`shapes`."""
    return [(x, y), (x + width, y), (x + width, y + height), (x, y + height)]


def ink(colour: str) -> str:
    """Black or white, whichever reads on ``colour``."""
    from matplotlib.colors import to_rgb

    red, green, blue = to_rgb(colour)
    return "white" if 0.299 * red + 0.587 * green + 0.114 * blue < 0.5 else "black"
