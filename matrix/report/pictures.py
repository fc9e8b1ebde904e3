"""The report's pictures drawn as SVG by matplotlib (an optional extra; ``matrix.report.gallery``
says which pictures a report has and what each shows): the heat map and the pool strips here,
a failing cell's picture in ``cell_pictures``, what they share in ``figures``.

Everything drawn comes from the cells' records (``CellResult``, steps included), so a report
merged from shards draws the same pictures. Drawing is deterministic: a fixed ``svg.hashsalt``
and no date, so writing the same results twice gives the same files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matrix.judge.result import CellResult
from matrix.report.cell_pictures import cell_steps
from matrix.report.figures import SMALL, frame, label_inches, legend, patch, svg, title
from matrix.report.gallery import SHADES, Picture, cells_of, shade
from matrix.report.tables import sort_cells, variants_of

_STARTABLE = "#2166ac"  # startable's marker


Job = tuple[Picture, list[CellResult], str]  # a picture, the cells it is of, the release


def draw(picture: Picture, cells: Sequence[CellResult], release: str) -> str:
    """The picture as SVG text."""
    return draw_job((picture, cells_of(picture, cells), release))


def draw_job(job: Job) -> str:
    """A picture's SVG from the cells it is of (see :func:`matrix.report.gallery.cells_of`)."""
    picture, cells, release = job
    drawing = cell_steps if picture.cell else _pool_strips if picture.model else _heat_map
    return svg(drawing, cells, release)


def _heat_map(figure: Any, cells: list[CellResult], release: str) -> None:
    from matplotlib.colors import ListedColormap

    cases = list(dict.fromkeys(c.case for c in sort_cells(cells)))
    variants = variants_of(cells)
    keys = list(SHADES)
    by_place = {(c.case, c.variant): c for c in cells}
    grid = [
        [
            keys.index(shade(by_place[c, v])) if (c, v) in by_place else float("nan")
            for v in variants
        ]
        for c in cases
    ]
    used = [k for k in keys if any(shade(c) == k for c in cells)]
    legend_inches = legend(figure, [patch(SHADES[k], k) for k in used], 4)
    left = label_inches(cases)
    size = (max(left + 0.5 * len(variants) + 0.6, 5.6), 1.2 + legend_inches + 0.12 * len(cases))
    frame(figure, size, (left, 0.6, 1.0, legend_inches + 0.1))
    axes = figure.subplots()
    colours = ListedColormap([SHADES[k] for k in keys])
    axes.imshow(grid, cmap=colours, vmin=-0.5, vmax=len(keys) - 0.5, aspect="auto")
    axes.set_xticks(range(len(variants)), variants, rotation=30, ha="left")
    axes.xaxis.tick_top()
    axes.set_yticks(range(len(cases)), cases, fontsize=SMALL)
    axes.set_xticks([x + 0.5 for x in range(len(variants) - 1)], minor=True)
    axes.set_yticks([y + 0.5 for y in range(len(cases) - 1)], minor=True)
    axes.tick_params(which="minor", length=0)
    axes.grid(which="minor", color="white", linewidth=0.6)
    for (case, variant), cell in by_place.items():
        if not cell.as_expected:  # against the case's expectation
            axes.text(variants.index(variant), cases.index(case), "!", ha="center", va="center")
    title(figure, f"Cases x variants by worst severity, vLLM {release} (!: unexpected)")


def _pool_strips(figure: Any, cells: list[CellResult], release: str) -> None:
    from matplotlib.colors import ListedColormap

    variants = variants_of(cells)
    cases = list(dict.fromkeys(c.case for c in sort_cells(cells)))
    pools = [p for c in cells for p in c.swept] or [0, 1]
    low, high = min(pools), max(pools)
    shown = {key for c in cells if len(c.swept) == 2 for _, _, key in _runs(c)}
    handles = [patch(SHADES[k], k) for k in SHADES if k in shown] + _markers()
    legend_inches = legend(figure, handles, 4)
    left, panel = label_inches(cases), 0.35 + 0.13 * len(cases)
    size = (
        left + max(0.1 * (high - low + 3), 4.5) + 0.3,
        0.75 + legend_inches + panel * len(variants),
    )
    frame(figure, size, (left, 0.3, 0.75, legend_inches + 0.35))
    figure.subplots_adjust(hspace=0.35 / (panel - 0.35))
    panels = figure.subplots(len(variants), 1, sharex=True, squeeze=False)[:, 0]
    keys = list(SHADES)
    colours = ListedColormap([SHADES[k] for k in keys])
    for axes, variant in zip(panels, variants, strict=True):
        # One image a panel (a row a case, a column a pool), not a bar a run: many times faster.
        grid = [[float("nan")] * (high - low + 1) for _ in cases]
        fits: list[tuple[float, int]] = []  # drawn in one call each, not a line a cell
        startables: list[tuple[int, int]] = []
        for row, case in enumerate(cases):
            cell = next((c for c in cells if c.case == case and c.variant == variant), None)
            if cell is None or len(cell.swept) != 2:
                continue
            for start, length, key in _runs(cell):
                grid[row][start - low : start - low + length] = [keys.index(key)] * length
            fits.append((cell.fit - 0.5, row))
            if cell.startable is not None:
                startables.append((cell.startable, row))
        if fits:
            xs, rows = zip(*fits, strict=True)
            axes.vlines(xs, [r - 0.5 for r in rows], [r + 0.5 for r in rows], color="black", lw=1.5)
        if startables:
            xs, rows = zip(*startables, strict=True)
            axes.plot(xs, rows, marker="^", color=_STARTABLE, ms=4, lw=0)
        extent = (low - 0.5, high + 0.5, len(cases) - 0.5, -0.5)
        axes.imshow(
            grid,
            cmap=colours,
            vmin=-0.5,
            vmax=len(keys) - 0.5,
            aspect="auto",
            extent=extent,
            interpolation="nearest",
        )
        axes.set_ylim(len(cases) - 0.5, -0.5)
        axes.set_yticks(range(len(cases)), cases, fontsize=SMALL)
        axes.set_title(variant, loc="left", fontsize=8, pad=2)
        axes.tick_params(labelbottom=True)
        axes.grid(axis="x", color="#e0e0e0", linewidth=0.5)
        axes.set_axisbelow(True)
    panels[-1].set_xlabel("pool (blocks)")
    panels[-1].set_xlim(low - 1, high + 1)
    title(figure, f"{cells[0].model}: the outcome at each pool, vLLM {release}")


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
