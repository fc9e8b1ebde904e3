"""The reports stay small as the matrix grows: the Markdown under GitHub's comment limit at
today's size and at ten times it, still holding its headline; the HTML page and the pictures
folder under 3 MB at today's size. Today's matrix is every shipped cell's id (recorded in
``cases/durations.json``) with outcomes of each kind, built in-process from ``CellResult``
records: no vLLM run, and a size check, not a timed one."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from matrix.judge.result import CellResult
from matrix.judge.severity import PoolFailure
from matrix.report import gallery, pictures
from matrix.report.gallery import Picture, PictureChoice, planned
from matrix.report.html import html_page
from matrix.report.info import RunInfo
from matrix.report.markdown import COMMENT_LIMIT, markdown_report
from matrix.run.records import PoolSteps, StepMark
from tests.helpers import CASES

INFO = RunInfo("0.33.0", ships="fixed")
LIMIT = 3_000_000  # bytes: the HTML page, and the pictures folder
# A pictured cell's runs, as today's typical one: two pools, two groups, two requests, 7 steps
# (today's 62 pictured cells have 1-10 groups, 1-2 requests and 3-13 steps).
GROUPS = ("full attention, 16-token blocks", "mamba (align), 4096-token blocks")
STEPS = tuple(
    PoolSteps(
        pool=pool,
        groups=GROUPS,
        requests=("head", "tail"),
        free=tuple(max(0, pool - 3 - step) for step in range(7)),
        held=tuple(tuple((1, step % 2) for _ in GROUPS) for step in range(7)),
        marks=(
            StepMark(1, "admitted", "head"),
            StepMark(2, "loaded", "head"),
            StepMark(5, "stops"),
        ),
        stopped="stuck",
    )
    for pool in (9, 12)
)


@functools.cache
def _column(file: str) -> str | None:
    found = re.search(r"^column: (.+)$", (CASES / file).read_text(encoding="utf-8"), re.M)
    return found.group(1) if found else None


def _cell(case: str, variant: str, file: str, index: int) -> CellResult:
    """A cell of today's shape: ``none`` stalls, ``proposed`` passes, a model's ``past``
    prompt stalls under the rest, and every fourth other cell over-reserves."""
    model = file.removeprefix("model_").removesuffix(".yaml").removesuffix("_devices")
    fit = 12 + index % 7
    stalls = variant == "none" or (file.startswith("model_") and "past" in case)
    if variant == "proposed" or not (stalls or index % 4 == 0):
        failures: tuple[PoolFailure, ...] = ()
    elif stalls:
        failures = tuple(PoolFailure(p, "stall", "unpromotable") for p in (fit - 2, fit - 1))
    else:
        failures = (PoolFailure(fit, "not_admitted", "over_reservation"),)
    kind = failures[0].kind if failures else "finished"
    return CellResult(
        case,
        _column(file),
        variant,
        "fail" if failures else "pass",
        None,
        "fail" if failures else "pass",
        kind,
        f"{kind} at pools {fit - 2}-{fit - 1} (fit {fit})" if failures else "finished",
        f"{file}:3",
        True,
        fit=fit,
        failing_pools=tuple(f.pool for f in failures),
        model=model if file.startswith("model_") else None,
        over_reservation=1 if kind == "not_admitted" else 0,
        startable=fit + 1,
        failures=failures,
        severity=failures[0].severity if failures else None,
        swept=(fit - 6, fit + 6),
    )


def todays_cells() -> list[CellResult]:
    """Every shipped cell, in file order, the ones today's default choice pictures with
    :data:`STEPS`."""
    ids = json.loads((CASES / "durations.json").read_text(encoding="utf-8"))
    choice = PictureChoice(drawn=True, everything=False)
    cells = []
    for index, test_id in enumerate(sorted(ids)):
        path, _, name = test_id.partition("::")
        case, _, variant = name.rpartition("-")
        cell = _cell(case, variant, Path(path).name, index)
        cells.append(replace(cell, steps=STEPS) if choice.wants(cell, path) else cell)
    return cells


def tenfold(cells: list[CellResult]) -> list[CellResult]:
    """The matrix ten times over: each case again under nine new names (its model too)."""
    copies = [
        replace(c, case=f"copy{k}-{c.case}", model=c.model and f"copy{k}-{c.model}", steps=())
        for k in range(1, 10)
        for c in cells
    ]
    return [*cells, *copies]


@pytest.fixture(scope="module")
def today() -> list[CellResult]:
    return todays_cells()


def _headline(text: str, cells: list[CellResult]) -> None:
    assert len(text) < COMMENT_LIMIT
    assert text.startswith("# KV reservation matrix on vLLM 0.33.0")
    assert f"{len(cells)} cells" in text.split("\n\n")[1]
    for title in ("How to read this report", "Summary", "Findings", "Worst severity", "Models"):
        assert f"\n## {title}" in text, title
    assert "[`vllm-0.33.0.html`](vllm-0.33.0.html)" in text
    assert "[`vllm-0.33.0.json`](vllm-0.33.0.json)" in text


def test_the_markdown_fits_a_comment_at_todays_size(today: list[CellResult]) -> None:
    text = markdown_report(today, INFO, "vllm-0.33.0", planned(today, every_case=False))
    _headline(text, today)
    assert "<details><summary>Models in full</summary>" in text  # what fits stays whole
    assert "**Tightness**: left out for GitHub's comment limit" in text
    assert text.count("left out for GitHub's comment limit") == 1
    assert "in full in `vllm-0.33.0.html` and `vllm-0.33.0.json`" in text


def test_the_markdown_fits_a_comment_at_ten_times_the_size(today: list[CellResult]) -> None:
    cells = tenfold(today)
    assert len(cells) == 10 * len(today)
    text = markdown_report(cells, INFO, "vllm-0.33.0", planned(cells, every_case=False))
    _headline(text, cells)
    assert "**Cases x variants**: left out" in text
    assert "| copy9-" in text  # the brief Models table, whole: 140 models


@pytest.mark.skipif(not gallery.installed(), reason="matplotlib is not installed")
def test_the_page_and_the_pictures_stay_under_3_mb_at_todays_size(
    today: list[CellResult],
) -> None:
    """One picture of each kind drawn (the heat map, the largest model's strip, a pictured
    cell), standing for every picture of that kind that today's cells plan."""
    planned_now = planned(today, every_case=False)
    largest = max({c.model for c in today if c.model}, key=[c.model for c in today].count)
    strip = next(p for p in planned_now if p.model == largest)
    cell = next(p for p in planned_now if p.cell is not None)
    drawn = {kind: pictures.draw(p, today, "0.33.0") for kind, p in _kinds(strip, cell).items()}
    for kind, svg in drawn.items():
        assert len(svg) < {"map": 60_000, "strip": 60_000, "cell": 25_000}[kind], (kind, len(svg))

    def of_kind(picture: Picture) -> str:
        return drawn["cell" if picture.cell else "strip" if picture.model else "map"]

    folder = sum(len(of_kind(p).encode()) for p in planned_now)
    page = html_page(today, INFO, planned_now, of_kind).encode()
    assert len(planned_now) > 50 and folder < LIMIT and len(page) < LIMIT, (folder, len(page))


def _kinds(strip: Picture, cell: Picture) -> dict[str, Picture]:
    return {"map": gallery.HEAT_MAP, "strip": strip, "cell": cell}
