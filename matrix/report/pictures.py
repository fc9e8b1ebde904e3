"""The report's pictures drawn as SVG by matplotlib (an optional extra; ``matrix.report.gallery``
says which pictures a report has and what each shows): the heat maps and the pool strips here,
a failing cell's picture in ``cell_pictures``, what they share in ``figures``.

Everything drawn comes from the cells' records (``CellResult``, steps included), so a report
merged from shards draws the same pictures. Drawing is deterministic: a fixed ``svg.hashsalt``
and no date, so writing the same results twice gives the same files. Each picture is at most
about as wide as the HTML page (``WIDEST``), so the page shows it at its own size and its
text (``SMALL``, 7 points) at about 9 px.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from matrix.judge.result import CellResult
from matrix.report.cell_pictures import cell_steps
from matrix.report.figures import (
    SMALL,
    box,
    frame,
    ink,
    label_inches,
    legend,
    patch,
    shapes,
    svg,
    title,
)
from matrix.report.gallery import SHADES, Picture, cells_of, shade
from matrix.report.tables import sort_cells, variants_of
from matrix.wording import plural

_STARTABLE = "#2166ac"  # startable's marker
WIDEST = 10.8  # inches: the HTML page's width (78em of 14 px, less its padding) is 11
_RANK = {key: index for index, key in enumerate(SHADES)}  # worst first

Job = tuple[Picture, list[CellResult], str]  # a picture, the cells it is of, the release
Shapes = dict[str, list[list[tuple[float, float]]]]  # polygons by colour


def draw(picture: Picture, cells: Sequence[CellResult], release: str) -> str:
    """The picture as SVG text."""
    return draw_job((picture, cells_of(picture, cells), release))


def draw_job(job: Job) -> str:
    """A picture's SVG from the cells it is of (see :func:`matrix.report.gallery.cells_of`)."""
    picture, cells, release = job
    if picture.cell:
        return svg(cell_steps, cells, release)
    if picture.model:
        return svg(_pool_strips, cells, release)
    return svg(_case_map if picture.per_case else _group_map, cells, release)


def severity_groups(cells: Sequence[CellResult]) -> list[tuple[str, list[CellResult]]]:
    """The heat map's rows: each case file's cells that are not a model's (by file and
    Summary column, in name order), then each model's cells (by name), each with its label
    (``single_group.yaml (Single group), 3 cases``)."""
    files: dict[str, list[CellResult]] = {}
    models: dict[str, list[CellResult]] = {}
    for cell in sort_cells(cells):
        if cell.model:
            models.setdefault(cell.model, []).append(cell)
            continue
        name = PurePath(cell.source.rsplit(":", 1)[0]).name or cell.case
        files.setdefault(f"{name} ({cell.column})" if cell.column else name, []).append(cell)
    rows = [*sorted(files.items()), *sorted(models.items())]
    return [(f"{name}, {plural(len({c.case for c in of}), 'case')}", of) for name, of in rows]


def _square(cells: Sequence[CellResult]) -> tuple[str, str]:
    """A heat map square of ``cells`` (one variant's): its worst shade, and how many of the
    cells have it (``!``: a cell against its case's expectation)."""
    shades = [shade(c) for c in cells]
    worst = min(shades, key=_RANK.__getitem__)
    mark = "!" if any(not c.as_expected for c in cells) else ""
    return worst, f"{shades.count(worst)}/{len(cells)}{mark}"


def _group_map(figure: Any, cells: list[CellResult], release: str) -> None:
    """A row per model and per other case file, a square per variant: the worst of its cells."""
    variants = variants_of(cells)
    grid: dict[tuple[int, int], tuple[str, str]] = {}
    groups = severity_groups(cells)
    for row, (_, of_group) in enumerate(groups):
        for column, variant in enumerate(variants):
            under = [c for c in of_group if c.variant == variant]
            if under:
                grid[row, column] = _square(under)
    note = "k/n: k of the n cells have the square's colour, their worst (!: a cell not as its"
    note += " case expects)"
    _heat_map(figure, [label for label, _ in groups], variants, grid, 0.24, note)
    title(figure, f"Worst severity per model and case file, by variant, vLLM {release}")


def _case_map(figure: Any, cells: list[CellResult], release: str) -> None:
    """A row per case, a square per variant: the cell's worst severity."""
    variants = variants_of(cells)
    cases = list(dict.fromkeys(c.case for c in sort_cells(cells)))
    grid: dict[tuple[int, int], tuple[str, str]] = {}
    for cell in cells:
        text = "" if cell.as_expected else "!"
        grid[cases.index(cell.case), variants.index(cell.variant)] = (shade(cell), text)
    _heat_map(figure, cases, variants, grid, 0.16, "!: a cell not as its case expects")
    title(figure, f"Cases x variants by worst severity, vLLM {release}")


def _heat_map(
    figure: Any,
    rows: list[str],
    variants: list[str],
    grid: dict[tuple[int, int], tuple[str, str]],
    high: float,
    note: str,
) -> None:
    """Labelled rows of squares ``high`` inches tall, one a variant, each its shade and text
    (a path a colour, no grid lines), ``note`` under the title, the legend below."""
    used = sorted({key for key, _ in grid.values()}, key=_RANK.__getitem__)
    legend_inches = legend(figure, [patch(SHADES[k], k) for k in used], 4) + 0.1
    left, wide = label_inches(rows), 0.8
    size = (max(left + wide * len(variants) + 0.3, 6.2), 1.0 + legend_inches + high * len(rows))
    frame(figure, size, (left, 0.3, 0.85, legend_inches))
    axes = figure.subplots()
    squares: Shapes = {}
    for (row, column), (key, text) in sorted(grid.items()):
        squares.setdefault(SHADES[key], []).append(box(column - 0.47, row - 0.44, 0.94, 0.88))
        if text:
            colour = ink(SHADES[key])
            axes.text(column, row, text, ha="center", va="center", fontsize=SMALL, color=colour)
    shapes(axes, squares)
    axes.set_xlim(-0.5, len(variants) - 0.5)
    axes.set_ylim(len(rows) - 0.5, -0.5)
    axes.set_xticks(range(len(variants)), variants)
    axes.xaxis.tick_top()
    axes.set_yticks(range(len(rows)), rows, fontsize=SMALL)
    axes.tick_params(length=0)
    for spine in axes.spines.values():
        spine.set_visible(False)
    figure.text(0.5, 1 - 0.32 / size[1], note, ha="center", va="top", fontsize=SMALL)


def short_label(case: str, model: str) -> str:
    """A case's row in its model's strip, the model's name it starts with left out:
    ``llama-3.1-8b[run=eagle1-aligned]`` -> ``run=eagle1-aligned``."""
    rest = case.removeprefix(model) if model else case
    if rest.startswith("[") and rest.endswith("]"):
        rest = rest[1:-1]
    return rest.removeprefix("-") or case


def _pool_strips(figure: Any, cells: list[CellResult], release: str) -> None:
    """A panel per variant side by side, a row per case: the outcome at each pool swept
    (one path a colour), the fit's left edge and ``startable`` marked."""
    from matplotlib.ticker import MaxNLocator

    model = cells[0].model or ""
    variants = variants_of(cells)
    cases = list(dict.fromkeys(c.case for c in sort_cells(cells)))
    by_place = {(c.case, c.variant): c for c in cells}
    pools = [p for c in cells for p in c.swept] or [0, 1]
    low, high = min(pools), max(pools)
    shown = {key for c in cells if len(c.swept) == 2 for _, _, key in _runs(c)}
    handles = [patch(SHADES[k], k) for k in SHADES if k in shown] + _markers()
    legend_inches = legend(figure, handles, 4)
    labels = [short_label(case, model) for case in cases]
    left, gap, count = label_inches(labels), 0.12, len(variants)
    panel = max(0.6, min(1.3, (WIDEST - left - 0.15 - gap * (count - 1)) / count))
    width = left + count * panel + gap * (count - 1) + 0.15
    size = (width, 1.1 + legend_inches + 0.17 * len(cases))
    frame(figure, size, (left, 0.15, 0.6, legend_inches + 0.45))
    figure.subplots_adjust(wspace=gap / panel)
    panels = figure.subplots(1, count, sharey=True, squeeze=False)[0]
    # A few pools marked, none at a panel's edge (where it would meet the next panel's).
    ticks = [
        t for t in MaxNLocator(nbins=3, integer=True).tick_values(low, high) if low <= t <= high
    ]
    # A point in data units across (pools) and down (rows), for the marks drawn as shapes.
    across, down = (high - low + 2) / (panel * 72), 1 / (0.17 * 72)
    for axes, variant in zip(panels, variants, strict=True):
        drawn: Shapes = {}
        for row, case in enumerate(cases):
            cell = by_place.get((case, variant))
            if cell is None or len(cell.swept) != 2:
                continue
            for start, length, key in _runs(cell):
                drawn.setdefault(SHADES[key], []).append(box(start - 0.5, row - 0.4, length, 0.8))
            fit = box(cell.fit - 0.5 - 0.6 * across, row - 0.5, 1.2 * across, 1)
            drawn.setdefault("black", []).append(fit)
            if cell.startable is not None:
                x, y = cell.startable, row + 2 * down
                triangle = [(x - 2.5 * across, y), (x + 2.5 * across, y), (x, y - 5 * down)]
                drawn.setdefault(_STARTABLE, []).append(triangle)
        shapes(axes, drawn)
        axes.set_xlim(low - 1, high + 1)
        axes.set_ylim(len(cases) - 0.5, -0.5)
        axes.set_xticks(ticks)
        axes.tick_params(length=0, labelsize=SMALL)
        axes.set_title(variant, fontsize=8, pad=3)
    panels[0].set_yticks(range(len(cases)), labels)
    figure.text(
        (left + size[0] - 0.15) / 2 / size[0],
        (legend_inches + 0.12) / size[1],
        "pool (blocks)",
        ha="center",
        fontsize=SMALL,
    )
    title(figure, f"{model}: the outcome at each pool, vLLM {release}")


def _runs(cell: CellResult) -> list[tuple[int, int, str]]:
    """The cell's swept pools as runs of one outcome: (first pool, how many, outcome)."""
    failed = {f.pool: f.severity for f in cell.failures}
    runs: list[tuple[int, int, str]] = []
    for pool in range(cell.swept[0], cell.swept[1] + 1):
        key = failed.get(pool, "finished")
        if runs and runs[-1][2] == key:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1, key)
        else:
            runs.append((pool, 1, key))
    return runs


def _markers() -> list[Any]:
    from matplotlib.lines import Line2D

    return [
        Line2D([], [], color="black", lw=1.5, label="the fit (its left edge)"),
        Line2D([], [], color=_STARTABLE, marker="^", lw=0, label="startable"),
    ]
