"""Pictures: what a failing cell records for its picture (and that nothing else records any),
that it survives the JSON round trip, and the SVGs drawn from it (skipped without matplotlib):
stable names, the same bytes each time, a report rewritten from its JSON alike."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from matrix.adapters.protocol import FINISHED, LOADING, RUNNING, WAITING, RequestState
from matrix.adapters.protocol import SchedulerState as State
from matrix.judge.result import CellResult
from matrix.judge.runs import RunOutcome
from matrix.judge.severity import PoolFailure
from matrix.judge.verdict import Verdict, drawn_pools
from matrix.report import document as document_module
from matrix.report import drawing, gallery, pictures
from matrix.report.document import document
from matrix.report.files import RunInfo, write_report
from matrix.run.records import PoolSteps, RunTrace, StepMark, StepRecord
from matrix.run.steps import step_marks
from tests.helpers import TWO_GROUP_CASE, needs_vllm

needs_matplotlib = pytest.mark.skipif(
    not gallery.installed(), reason="matplotlib is not installed (the [pictures] extra)"
)
INFO = RunInfo("0.33.0", ships="fixed")


def request(status: str, computed: int = 0, loaded: bool = False, preempted: int = 0) -> Any:
    return RequestState("a", status, computed, loaded, preempted)  # type: ignore[arg-type]


def record(step: int, state: RequestState, free: int, scheduled: int = 0) -> StepRecord:
    return StepRecord(step, (("a", scheduled),) if scheduled else (), State((state,), free), free)


STALL = PoolSteps(
    pool=9,
    groups=("full attention, 4-token blocks", "sliding window 8, 4-token blocks"),
    requests=("a", "b"),
    free=(4, 4, 4, 4),
    held=(((2, 0), (2, 0)), ((2, 0), (2, 0)), ((2, 0), (2, 0)), ((2, 0), (2, 0))),
    marks=(StepMark(1, "admitted", "a"), StepMark(2, "loaded", "a"), StepMark(2, "stops")),
    stopped="stuck",
)
AT_FIT = PoolSteps(
    pool=12,
    groups=STALL.groups,
    requests=("a", "b"),
    free=(7, 7, 5, 11),
    held=(((2, 0), (2, 0)), ((2, 0), (2, 0)), ((3, 0), (3, 0)), ((0, 0), (0, 0))),
    marks=(StepMark(1, "admitted", "a"), StepMark(3, "running", "a"), StepMark(4, "finished", "a")),
    stopped="finished",
)


def failing_cell(case: str = "small[k=1]", variant: str = "original", **more: Any) -> CellResult:
    fields: dict[str, Any] = {
        "fit": 12,
        "failing_pools": (9, 10),
        "failures": (
            PoolFailure(9, "stall", "unpromotable"),
            PoolFailure(10, "stall", "unpromotable"),
        ),
        "severity": "unpromotable",
        "swept": (6, 14),
        "steps": (STALL, AT_FIT),
        "column": "Multiple groups",
        **more,
    }
    column = fields.pop("column")
    return CellResult(
        case,
        column,
        variant,
        "fail",
        None,
        "fail",
        "stall",
        "stall at pools 9-10",
        "x.yaml:3",
        True,
        **fields,
    )


def passing_cell(case: str = "small[k=1]", variant: str = "fixed") -> CellResult:
    return CellResult(
        case,
        "Multiple groups",
        variant,
        "pass",
        None,
        "pass",
        "finished",
        "ok",
        "x.yaml:3",
        True,
        fit=12,
        swept=(6, 14),
    )


CELLS = [failing_cell(), passing_cell(), passing_cell("other"), failing_cell("other", "none")]


def test_steps_survive_the_json_round_trip() -> None:
    cell = failing_cell()
    data = json.loads(json.dumps(cell.to_dict()))
    assert data["steps"][0]["steps"][0] == "4:2,0;2,0"  # one compact string a step
    assert data["steps"][0]["marks"][-1] == "2 stops"
    assert CellResult.from_dict(data) == cell
    assert "steps" not in passing_cell().to_dict()  # nothing for a cell with no picture


def test_marks_come_from_the_request_states() -> None:
    trace = RunTrace(
        9,
        (
            record(1, request(LOADING), 5),
            record(2, request(WAITING, loaded=True), 5),
            record(3, request(WAITING, loaded=True), 5),
            record(4, request(WAITING, loaded=True), 5),
        ),
        "stuck",
    )
    marks = [(m.step, m.what, m.request) for m in step_marks(trace)]
    assert marks == [(1, "admitted", "a"), (2, "loaded", "a"), (2, "stops", "")]
    finished = RunTrace(
        9,
        (
            record(1, request(RUNNING, 4), 5, 4),
            record(2, request(RUNNING, 9, preempted=1), 5, 4),
            record(3, request(FINISHED), 9),
        ),
        "finished",
    )
    marks = [(m.step, m.what) for m in step_marks(finished)]
    assert marks == [(1, "running"), (2, "preempted"), (3, "finished")]


def test_only_a_failing_cell_is_drawn_at_its_first_failing_pool_and_fit() -> None:
    outcomes = tuple(RunOutcome(p, "stall" if p < 12 else "finished", "") for p in range(6, 15))
    failing = Verdict("fail", "stall", "", 12, outcomes, failing_pools=(9, 10))
    assert drawn_pools(failing) == (9, 12)
    assert drawn_pools(Verdict("fail", "stall", "", 9, outcomes, failing_pools=(9,))) == (9,)
    assert drawn_pools(Verdict("pass", "finished", "", 12, outcomes)) == ()
    timeout = Verdict("fail", "timeout", "", 12, outcomes, failing_pools=(9,))
    assert drawn_pools(timeout) == ()
    unswept = Verdict("fail", "stall", "", 20, outcomes, failing_pools=(9,))
    assert drawn_pools(unswept) == (9,)  # the fit is drawn where the cell swept it


@needs_vllm
def test_a_failing_cell_records_its_picture(adapter: Any, write_case: Any) -> None:
    from matrix.case.expansion import cells_from_file
    from matrix.judge.runs import classify_run
    from matrix.judge.verdict import judge_run
    from matrix.run.cell import run_cell
    from matrix.run.pools import run_pool
    from matrix.run.steps import record_steps

    cells = {c.variant: c for c in cells_from_file(write_case(TWO_GROUP_CASE))}
    verdict = judge_run(run_cell(adapter, cells["original"]))
    pools = drawn_pools(verdict)
    assert pools == (verdict.failing_pools[0], verdict.fit)
    recorded = record_steps(adapter, cells["original"], None, pools)
    assert [r.pool for r in recorded] == list(pools)
    stall, at_fit = recorded
    assert stall.requests == ("a",) and len(stall.groups) == 2
    assert all("full attention" in label for label in stall.groups)
    for run in recorded:  # every block is the null block, free or a request's
        for free, held in zip(run.free, run.held, strict=True):
            assert free + sum(map(sum, held)) + 1 == run.pool
    assert {"admitted", "loaded", "stops"} <= {m.what for m in stall.marks}
    assert "finished" in {m.what for m in at_fit.marks}
    # The run again is the run judged: the same outcome at that pool.
    judged = {o.pool: o.kind for o in verdict.outcomes}
    case = adapter.resolve(cells["original"].case.definition)
    again = run_pool(adapter, case, "original", pools[0], record_blocks=True)
    assert classify_run(again).kind == judged[pools[0]] == "stall"
    assert len(again.held) == len(again.steps) == len(stall.free)
    # A passing cell runs nothing again.
    passing = judge_run(run_cell(adapter, cells["fixed"]))
    assert record_steps(adapter, cells["fixed"], None, drawn_pools(passing)) == ()


@needs_matplotlib
def test_pictures_have_stable_names_and_the_same_bytes_each_time() -> None:
    planned = gallery.planned(CELLS)
    names = [p.name for p in planned]
    assert names == [
        "severity.svg",
        "cells/other-none.svg",
        "cells/small_k=1-original.svg",
    ]
    for picture in planned:
        svg = pictures.draw(picture, CELLS, "0.33.0")
        assert svg.startswith("<?xml") and "</svg>" in svg
        assert "<dc:date>" not in svg
        assert pictures.draw(picture, CELLS, "0.33.0") == svg
    cell_svg = pictures.draw(planned[-1], CELLS, "0.33.0")
    for text in ("pool 9 (first failing pool)", "pool 12 (the fit)", "load admitted", "request a"):
        assert text in cell_svg


def test_a_report_draws_at_most_its_limit_and_says_how_many_it_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A report's pictures are bounded (a shard whose every cell has a model of its own would
    otherwise draw a picture a cell): the maps first, and the report counts the rest."""
    assert [p.name for p in gallery.planned(CELLS)][1:] == [
        "cells/other-none.svg",
        "cells/small_k=1-original.svg",
    ]
    assert gallery.left_out(CELLS) == 0
    monkeypatch.setattr(gallery, "MAX_PICTURES", 2)
    monkeypatch.setattr(document_module, "MAX_PICTURES", 2)
    drawn = gallery.planned(CELLS)
    assert [p.name for p in drawn] == ["severity.svg", "cells/other-none.svg"]
    assert gallery.left_out(CELLS) == 1
    opening = document(CELLS, INFO, drawn).opening
    assert opening[-1] == (
        "1 picture more not drawn: a report draws at most 2, the maps and the models' strips first."
    )
    assert not any("not drawn" in line for line in document(CELLS, INFO, None).opening)


def test_a_long_name_is_cut_to_a_file_name_that_stays_its_own() -> None:
    """A model's name or a case's axes from anyone's shard make picture names: each is a file
    name a file system takes, the same each time, and two long names that share their start
    do not share a picture."""
    long_model = "m" * 400
    cells = [
        failing_cell(f"{'x' * 300}[k=1]", model=long_model, column=None),
        failing_cell(f"{'x' * 300}[k=2]", model=f"{long_model}2", column=None),
    ]
    names = [p.name for p in gallery.planned(cells)]
    assert len(set(names)) == len(names) == 5
    assert all(len(Path(name).name) <= gallery.MAX_SLUG + len("pools-.svg") for name in names)
    assert names == [p.name for p in gallery.planned(cells)]
    assert gallery.planned(CELLS)[-1].name == "cells/small_k=1-original.svg"  # short: as it was


@needs_matplotlib
def test_a_report_rewritten_from_its_json_is_the_same(tmp_path: Path) -> None:
    """What ``matrix merge`` relies on: the Markdown, its pictures and the HTML page come from
    the cells' records alone."""
    model = [failing_cell("m[run=x]", model="m", column=None), passing_cell("m[run=y]")]
    cells = [*CELLS, *model]
    first, second = tmp_path / "a", tmp_path / "b"
    for suffix in (".json", ".md", ".html"):
        write_report(first / f"vllm-0.33.0{suffix}", cells, INFO)
    data = json.loads((first / "vllm-0.33.0.json").read_text())
    again = [CellResult.from_dict(c) for c in data["cells"]]
    drawing._drawn.clear()  # drawn anew, not kept from the first report
    for suffix in (".md", ".html"):
        write_report(second / f"vllm-0.33.0{suffix}", again, INFO)
    written = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert Path("vllm-0.33.0/pools-m.svg") in written
    assert Path("vllm-0.33.0/cells/m_run=x-original.svg") in written
    for path in written:
        if path.suffix != ".json":
            assert (first / path).read_bytes() == (second / path).read_bytes(), path
    markdown = (first / "vllm-0.33.0.md").read_text()
    assert "![Worst severity per model and case file](vllm-0.33.0/severity.svg)" in markdown
    assert "in `vllm-0.33.0/cells/`" in markdown


def test_the_stored_pictures_are_keyed_on_every_module_that_draws_them() -> None:
    """Every ``matrix.report`` module that ``pictures`` draws with, found by its imports, is
    in the picture store's key: an edit to any of them draws anew instead of serving the old."""
    package = Path(pictures.__file__).parent
    found: set[str] = set()
    todo = ["pictures"]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        tree = ast.parse((package / f"{name}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module.startswith("matrix.report."):
                    todo.append(node.module.removeprefix("matrix.report."))
                elif node.module == "matrix.report":
                    todo.extend(alias.name for alias in node.names)
    keyed = {Path(str(m.__file__)).stem for m in drawing.DRAWING_MODULES}
    assert {"figures", "cell_pictures"} <= found
    assert found <= keyed


@needs_matplotlib
def test_stale_pictures_are_removed(tmp_path: Path) -> None:
    write_report(tmp_path / "r.md", CELLS, INFO)
    assert (tmp_path / "r" / "cells" / "other-none.svg").exists()
    write_report(tmp_path / "r.md", CELLS[:3], INFO)
    assert not (tmp_path / "r" / "cells" / "other-none.svg").exists()
    assert (tmp_path / "r" / "cells" / "small_k=1-original.svg").exists()


def test_without_matplotlib_the_reports_say_pictures_are_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("matrix.report.gallery.installed", lambda: False)
    for suffix in (".md", ".html"):
        write_report(tmp_path / f"r{suffix}", CELLS, INFO)
        text = (tmp_path / f"r{suffix}").read_text()
        assert "Pictures are off: matplotlib is not installed" in text
        assert "vllm-kv-matrix[pictures]" in text
        assert ".svg" not in text
    assert not (tmp_path / "r").exists()


@needs_matplotlib
def test_pictures_switched_off_are_said_to_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(gallery.SWITCH, "off")
    write_report(tmp_path / "r.md", CELLS, INFO)
    assert "Pictures are off: MATRIX_PICTURES=off." in (tmp_path / "r.md").read_text()
    assert not (tmp_path / "r").exists()


@needs_matplotlib
def test_pictures_drawn_in_other_processes_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    planned = gallery.planned(CELLS)
    drawing._drawn.clear()
    here = drawing.draw_all(planned, CELLS, "0.33.0")
    drawing._drawn.clear()
    monkeypatch.setattr(drawing, "PER_PROCESS", 1)
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert drawing.draw_all(planned, CELLS, "0.33.0") == here
    drawing._drawn.clear()


def test_a_run_pictures_what_a_reader_looks_at_unless_asked_for_every_failing_cell() -> None:
    """By default: a cell against its expectation, a finding's, and the first of each kind
    and severity in a case file; ``MATRIX_PICTURES=all`` every failing cell; off none."""
    stall = failing_cell(variant="none")
    again = failing_cell(variant="original")
    other = replace(failing_cell(variant="group_count"), kind="not_admitted")
    deadlock = failing_cell(variant="all_groups", severity="deadlock")
    wrong = replace(failing_cell(variant="fixed"), as_expected=False)
    passing = passing_cell(variant="stock")
    cells = [stall, again, other, deadlock, wrong, passing]
    read = gallery.PictureChoice(drawn=True, everything=False)
    assert [read.wants(c, "a.yaml") for c in cells] == [True, False, True, True, True, False]
    assert read.wants(again, "b.yaml")  # another case file's first
    everything = gallery.PictureChoice(drawn=True, everything=True)
    assert [everything.wants(c, "a.yaml") for c in cells] == [True] * 5 + [False]
    off = gallery.PictureChoice(drawn=False, everything=True)
    assert not any(off.wants(c, "a.yaml") for c in cells)


@needs_matplotlib
def test_pictures_are_readable_at_the_pages_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each picture is at most as wide as the HTML page shows it (so it is not scaled down)
    and no text in it is under 7 points (about 9 px there); the heat map of every case only
    with the full gallery."""
    model = [failing_cell("m[run=x]", model="m", column=None), passing_cell("m[run=y]")]
    cells = [*CELLS, *model]
    assert "severity-cases.svg" not in [p.name for p in gallery.planned(cells)]
    monkeypatch.setenv(gallery.SWITCH, "all")
    planned = gallery.planned(cells)
    assert [p.name for p in planned][:3] == ["severity.svg", "severity-cases.svg", "pools-m.svg"]
    for picture in planned:
        svg = pictures.draw(picture, cells, "0.33.0")
        width = float(re.search(r'<svg[^>]* width="([\d.]+)pt"', svg).group(1))  # type: ignore[union-attr]
        assert width <= pictures.WIDEST * 72, picture.name
        sizes = [float(size) for size in re.findall(r"font-size:([\d.]+)px", svg)]
        assert sizes and min(sizes) >= 7, picture.name
    strip = pictures.draw(planned[2], cells, "0.33.0")
    assert ">run=x<" in strip and ">m[run=x]<" not in strip  # the model's name once, above


def test_a_strips_rows_leave_out_the_models_name() -> None:
    assert pictures.short_label("llama-3.1-8b[run=eagle1-aligned]", "llama-3.1-8b") == (
        "run=eagle1-aligned"
    )
    assert pictures.short_label("m-devices[spec=k0]", "m") == "devices[spec=k0]"
    assert pictures.short_label("other", "m") == "other"


def test_the_heat_map_has_a_row_per_model_and_case_file() -> None:
    model = [
        failing_cell("m[run=x]", model="m", column=None),
        replace(passing_cell("m[run=y]", variant="original"), model="m", column=None),
    ]
    groups = pictures.severity_groups([*CELLS, *model])
    assert [label for label, _ in groups] == ["x.yaml (Multiple groups), 2 cases", "m, 2 cases"]
    under_original = [c for c in groups[1][1] if c.variant == "original"]
    assert pictures._square(under_original) == ("unpromotable", "1/2")
    wrong = replace(passing_cell(), as_expected=False)
    assert pictures._square([wrong]) == ("pass", "1/1!")


@needs_matplotlib
def test_smaller_svg_draws_the_same_paths() -> None:
    """What matplotlib repeats is left out; the geometry is kept (the page's pixels were
    compared in a browser when this was written: the same)."""
    from matrix.report.figures import _path_data, smaller

    assert _path_data("M 0 0 L 5 0 L 5 0 L 5 3 L 1 2 z") == "M0 0H5V3L1 2z"
    assert _path_data("M 0 0 A 1 1 0 0 1 2 2") == "M 0 0 A 1 1 0 0 1 2 2"  # not matplotlib's
    svg = pictures.draw(gallery.planned(CELLS)[-1], CELLS, "0.33.0")
    assert "<!DOCTYPE" not in svg and '<g id="' not in svg and "<g>" not in svg
    assert svg.count("<g") == svg.count("</g>") and smaller(svg) == svg
