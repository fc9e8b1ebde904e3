"""The report's pictures drawn as SVG by matplotlib (the only module importing it: an optional
extra; ``matrix.report.gallery`` says which pictures a report has and what each shows).

Everything drawn comes from the cells' records (``CellResult``, steps included), so a report
merged from shards draws the same pictures. Drawing is deterministic: a fixed ``svg.hashsalt``
and no date, so writing the same results twice gives the same files.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

from matrix.judge.result import CellResult
from matrix.report.gallery import SHADES, Picture, cells_of, shade
from matrix.report.tables import sort_cells, variants_of
from matrix.run.records import PoolSteps

_NULL, _LATER = "#404040", "#9e9ac8"
# Line hatches only: a dotted or starred one is a path of hundreds of curves in every SVG.
_HATCHES = ("", "///", "\\\\\\", "xxx", "---", "|||", "+++", "//", "\\\\", "-|")
_GEOMETRY = re.compile(r'\b(d|x|y|width|height|transform)="[^"]*"')
_DECIMALS = re.compile(r"(\d\.\d\d)\d+")
_BETWEEN_TAGS = re.compile(r">\s+<")  # the indentation: no text is whitespace alone
_SMALL, _STARTABLE = 5.5, "#2166ac"  # a label's font size (points); startable's marker
# A fixed salt for the SVG's ids, text as text (not glyph paths): the same file each time; one
# font family named, not matplotlib's list of ten on every label (a fifth of the file).
_STYLE: Any = {
    "svg.hashsalt": "vllm-kv-matrix",
    "svg.fonttype": "none",
    "font.size": 8.0,
    "font.sans-serif": ["DejaVu Sans"],
}


Job = tuple[Picture, list[CellResult], str]  # a picture, the cells it is of, the release


def draw(picture: Picture, cells: Sequence[CellResult], release: str) -> str:
    """The picture as SVG text."""
    return draw_job((picture, cells_of(picture, cells), release))


def draw_job(job: Job) -> str:
    """A picture's SVG from the cells it is of (see :func:`matrix.report.gallery.cells_of`)."""
    picture, cells, release = job
    drawing = _cell_steps if picture.cell else _pool_strips if picture.model else _heat_map
    return _svg(drawing, cells, release)


def _svg(drawing: Any, cells: list[CellResult], release: str) -> str:
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


def _frame(figure: Any, size: tuple[float, float], margins: tuple[float, ...]) -> None:
    """The figure's size and its axes' margins (left, right, top, bottom), in inches."""
    width, height = size
    left, right, top, bottom = margins
    figure.set_size_inches(width, height)
    figure.subplots_adjust(
        left=left / width, right=1 - right / width, top=1 - top / height, bottom=bottom / height
    )


def _label_inches(labels: Sequence[str], points: float = _SMALL) -> float:
    """About how wide the longest label is, in inches."""
    return 0.15 + 0.6 * points / 72 * max((len(label) for label in labels), default=1)


def _legend(figure: Any, handles: list[Any], columns: int) -> float:
    """The legend below the axes; returns the inches it takes."""
    figure.legend(handles=handles, loc="lower center", ncols=columns, frameon=False, fontsize=7)
    return 0.12 + 0.19 * -(-len(handles) // columns)


def _patch(colour: str, label: str, hatch: str = "") -> Any:
    from matplotlib.patches import Patch

    return Patch(facecolor=colour, edgecolor="#555555", hatch=hatch, label=label)


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
    legend = _legend(figure, [_patch(SHADES[k], k) for k in used], 4)
    left = _label_inches(cases)
    size = (max(left + 0.5 * len(variants) + 0.6, 5.6), 1.2 + legend + 0.12 * len(cases))
    _frame(figure, size, (left, 0.6, 1.0, legend + 0.1))
    axes = figure.subplots()
    colours = ListedColormap([SHADES[k] for k in keys])
    axes.imshow(grid, cmap=colours, vmin=-0.5, vmax=len(keys) - 0.5, aspect="auto")
    axes.set_xticks(range(len(variants)), variants, rotation=30, ha="left")
    axes.xaxis.tick_top()
    axes.set_yticks(range(len(cases)), cases, fontsize=_SMALL)
    axes.set_xticks([x + 0.5 for x in range(len(variants) - 1)], minor=True)
    axes.set_yticks([y + 0.5 for y in range(len(cases) - 1)], minor=True)
    axes.tick_params(which="minor", length=0)
    axes.grid(which="minor", color="white", linewidth=0.6)
    for (case, variant), cell in by_place.items():
        if not cell.as_expected:  # against the case's expectation
            axes.text(variants.index(variant), cases.index(case), "!", ha="center", va="center")
    figure.suptitle(f"Cases x variants by worst severity, vLLM {release} (!: unexpected)")


def _pool_strips(figure: Any, cells: list[CellResult], release: str) -> None:
    from matplotlib.colors import ListedColormap

    variants = variants_of(cells)
    cases = list(dict.fromkeys(c.case for c in sort_cells(cells)))
    pools = [p for c in cells for p in c.swept] or [0, 1]
    low, high = min(pools), max(pools)
    shown = {key for c in cells if len(c.swept) == 2 for _, _, key in _runs(c)}
    handles = [_patch(SHADES[k], k) for k in SHADES if k in shown] + _markers()
    legend = _legend(figure, handles, 4)
    left, panel = _label_inches(cases), 0.35 + 0.13 * len(cases)
    size = (left + max(0.1 * (high - low + 3), 4.5) + 0.3, 0.75 + legend + panel * len(variants))
    _frame(figure, size, (left, 0.3, 0.75, legend + 0.35))
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
        axes.set_yticks(range(len(cases)), cases, fontsize=_SMALL)
        axes.set_title(variant, loc="left", fontsize=8, pad=2)
        axes.tick_params(labelbottom=True)
        axes.grid(axis="x", color="#e0e0e0", linewidth=0.5)
        axes.set_axisbelow(True)
    panels[-1].set_xlabel("pool (blocks)")
    panels[-1].set_xlim(low - 1, high + 1)
    figure.suptitle(f"{cells[0].model}: the outcome at each pool, vLLM {release}")


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


# How each event shows in a cell picture's strip above its blocks.
_EVENTS = {
    "admitted": (">", "load admitted"),
    "loaded": ("o", "load completed"),
    "running": ("^", "scheduled"),
    "preempted": ("X", "preempted"),
    "finished": ("s", "finished"),
    "error": ("*", "vLLM raised"),
}


def _cell_steps(figure: Any, cells: list[CellResult], release: str) -> None:
    cell = cells[0]
    runs = sorted(cell.steps, key=lambda s: s.pool)
    first = runs[0]
    handles = [_patch(f"C{i}", f"request {r}") for i, r in enumerate(first.requests)]
    handles += [
        _patch("white", f"group {g}: {label}", _HATCHES[g % len(_HATCHES)])
        for g, label in enumerate(first.groups)
    ]
    handles += [_patch(SHADES["undersized"], "free"), _patch(_NULL, "null block")]
    if any(_later(run) for run in runs):
        handles.append(_patch(_LATER, "freed a step later"))
    handles += _event_keys(runs)
    legend = _legend(figure, handles, 3)
    strip = 0.2 + 0.2 * len(first.requests)
    size = (0.9 + 4.6 * len(runs), 0.75 + strip + 3.0 + 0.45 + legend)
    _frame(figure, size, (0.6, 0.15, 0.6, legend + 0.45))
    figure.subplots_adjust(wspace=0.5 / 4.2, hspace=0.12 / ((strip + 3.0) / 2))
    grid = figure.subplots(
        2, len(runs), squeeze=False, sharex="col", gridspec_kw={"height_ratios": [strip, 3.0]}
    )
    top = max(s.pool for s in runs) + 1
    for column, run in enumerate(runs):
        _events(grid[0][column], run)
        _blocks(grid[1][column], run, top)
        role = "the fit" if run.pool == cell.fit else "first failing pool"
        grid[0][column].set_title(f"pool {run.pool} ({role}): {_outcome(cell, run.pool)}")
    severity = f", {cell.severity}" if cell.severity else ""
    variants = ", ".join(c.variant for c in cells)
    figure.suptitle(f"{cell.case} under {variants}, vLLM {release}: {cell.kind}{severity}")


def _outcome(cell: CellResult, pool: int) -> str:
    failed = {f.pool: f for f in cell.failures}
    if pool not in failed:
        return "finished"
    return f"{failed[pool].kind} ({failed[pool].severity})"


def _later(run: PoolSteps) -> bool:
    """Whether some step has blocks neither free nor held by a request (freed a step later)."""
    return any(
        run.pool - 1 - free - sum(map(sum, held)) > 0
        for free, held in zip(run.free, run.held, strict=True)
    )


def _stops(run: PoolSteps) -> int | None:
    return next((m.step for m in run.marks if m.what == "stops"), None)


def _events(axes: Any, run: PoolSteps) -> None:
    """The strip of events: one row per request, a marker per event."""
    rows = {request: index for index, request in enumerate(run.requests)}
    at: dict[tuple[str, int], list[int]] = {}  # one line of markers per event and request
    for mark in run.marks:
        if mark.what in _EVENTS:
            at.setdefault((mark.what, rows.get(mark.request, 0)), []).append(mark.step)
    for (what, row), steps in at.items():
        axes.plot(steps, [row] * len(steps), marker=_EVENTS[what][0], color=f"C{row}", ms=5, lw=0)
    axes.tick_params(axis="x", bottom=False, labelbottom=False)
    stops = _stops(run)
    if stops is not None:
        axes.axvspan(stops - 0.5, len(run.free) + 0.5, color=SHADES["sizer"], alpha=0.12)
        axes.text(stops - 0.4, len(rows) - 0.4, "no progress from here", fontsize=6)
    axes.set_yticks(range(len(rows)), list(rows))
    axes.set_ylim(len(rows) - 0.3, -0.7)


def _event_keys(runs: Sequence[PoolSteps]) -> list[Any]:
    from matplotlib.lines import Line2D

    seen = {m.what for run in runs for m in run.marks}
    return [
        Line2D([], [], marker=marker, color="#555555", lw=0, label=label)
        for what, (marker, label) in _EVENTS.items()
        if what in seen
    ]


def _blocks(axes: Any, run: PoolSteps, top: int) -> None:
    """Each step's blocks, one stair each, bottom up: the null block, each group's blocks
    per request, blocks freed later (a finished request's, deferred a step by asynchronous
    scheduling), the free blocks; the pool line above them."""
    from matplotlib.ticker import MaxNLocator

    edges = [step + 0.5 for step in range(len(run.free) + 1)]
    bottom = [0] * len(run.free)

    def stair(heights: Sequence[int], colour: str, hatch: str = "") -> None:
        nonlocal bottom
        if any(heights):
            top_edge = [b + h for b, h in zip(bottom, heights, strict=True)]
            axes.stairs(
                top_edge, edges, baseline=bottom, fill=True, color=colour, hatch=hatch, lw=0
            )
            bottom = top_edge

    stair([1] * len(run.free), _NULL)
    for group in range(len(run.groups)):
        for index in range(len(run.requests)):
            heights = [held[group][index] for held in run.held]
            stair(heights, f"C{index}", _HATCHES[group % len(_HATCHES)])
    later = [max(0, run.pool - b - f) for b, f in zip(bottom, run.free, strict=True)]
    stair(later, _LATER)
    stair(run.free, SHADES["undersized"])
    axes.axhline(run.pool, color="black", linestyle="--", linewidth=1)
    axes.text(0.6, run.pool + 0.15, f"pool {run.pool}", fontsize=7, va="bottom")
    stops = _stops(run)
    if stops is not None:
        axes.axvspan(stops - 0.5, edges[-1], color=SHADES["sizer"], alpha=0.12)
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("step")
    axes.set_ylabel("blocks")
    axes.set_ylim(0, top + 1.5)
    axes.set_xlim(edges[0], edges[-1])
