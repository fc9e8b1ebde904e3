"""A failing cell's picture (``cells/<case>-<variants>.svg``): at its first failing pool and
at its fit, step by step, each KV cache group's blocks stacked per request, the free blocks,
the pool line, and a strip of events above (a load admitted or completed, a preemption, where
progress stops). Drawn by matplotlib from the cell's recorded steps alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matrix.judge.result import CellResult
from matrix.report.figures import frame, legend, patch, title
from matrix.report.gallery import SHADES
from matrix.run.records import PoolSteps

_NULL, _LATER = "#404040", "#9e9ac8"
# Line hatches only: a dotted or starred one is a path of hundreds of curves in every SVG.
_HATCHES = ("", "///", "\\\\\\", "xxx", "---", "|||", "+++", "//", "\\\\", "-|")


# How each event shows in a cell picture's strip above its blocks.
_EVENTS = {
    "admitted": (">", "load admitted"),
    "loaded": ("o", "load completed"),
    "running": ("^", "scheduled"),
    "preempted": ("X", "preempted"),
    "finished": ("s", "finished"),
    "error": ("*", "vLLM raised"),
}


def cell_steps(figure: Any, cells: list[CellResult], release: str) -> None:
    """Draws the cells' shared runs (one case, its variants that ran alike) on ``figure``."""
    cell = cells[0]
    runs = sorted(cell.steps, key=lambda s: s.pool)
    first = runs[0]
    handles = [patch(f"C{i}", f"request {r}") for i, r in enumerate(first.requests)]
    handles += [
        patch("white", f"group {g}: {label}", _HATCHES[g % len(_HATCHES)])
        for g, label in enumerate(first.groups)
    ]
    handles += [patch(SHADES["undersized"], "free"), patch(_NULL, "null block")]
    if any(_later(run) for run in runs):
        handles.append(patch(_LATER, "freed a step later"))
    handles += _event_keys(runs)
    legend_inches = legend(figure, handles, 3)
    strip = 0.2 + 0.2 * len(first.requests)
    size = (0.9 + 4.6 * len(runs), 0.75 + strip + 3.0 + 0.45 + legend_inches)
    frame(figure, size, (0.6, 0.15, 0.6, legend_inches + 0.45))
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
    title(figure, f"{cell.case} under {variants}, vLLM {release}: {cell.kind}{severity}")


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
        axes.text(stops - 0.4, len(rows) - 0.4, "no progress from here", fontsize=7)
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
