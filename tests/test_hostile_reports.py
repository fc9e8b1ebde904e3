"""Hostile shards and reports (CI artifacts, possibly from untrusted pull requests): no field of
one writes outside the output folder, and every malformed one is one line naming the file and
the key, in bounded memory and time, for ``merge``, ``crossversion`` and ``finding`` alike."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from matrix.__main__ import main
from matrix.case.split import place_digest
from matrix.report.files import inside
from matrix.report.release_reports import ReportError, load_reports
from tests.test_shards import cell, write_shard

# The ``shard`` field of a one-shard run of cells a and b.
PLACE = {"group": 1, "splits": 1, "selected": ["a-stock", "b-stock"], "selection": "0" * 16}


@pytest.fixture(autouse=True)
def no_pictures(monkeypatch: pytest.MonkeyPatch) -> None:
    """The refusals come before any drawing; the merges that pass need no pictures."""
    monkeypatch.setenv("MATRIX_PICTURES", "off")


def placed(field: dict[str, Any]) -> dict[str, Any]:
    """A ``shard`` field with the place its group, splits and cells make (as a run writes)."""
    place = place_digest(field["selection"], field["group"], field["splits"], field["selected"])
    return {**field, "place": place}


def shard(folder: Path, cells: list[dict[str, Any]] | None = None, **fields: Any) -> Path:
    """A one-shard run of cells a and b, with ``fields`` replacing the report's own (a
    ``shard`` field given its place)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = write_shard(folder, 1, cells or [cell("a"), cell("b")], splits=1)
    report = json.loads(path.read_text())
    report.update(fields)
    if "shard" in fields:
        report["shard"] = placed(fields["shard"])
    path.write_text(json.dumps(report))
    return path


def merge(capsys: pytest.CaptureFixture[str], *args: Path | str) -> tuple[int, list[str]]:
    status = main(["merge", *map(str, args)])
    return status, capsys.readouterr().out.splitlines()


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}


def test_a_version_that_climbs_out_of_out_is_refused_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's shard: ``vllm_version: ../../../../<folder>/pwned`` wrote pwned.json, .md,
    .html and a pictures folder in <folder>, and deleted every *.svg under <folder>/pwned."""
    victim = tmp_path / "victim"
    (victim / "pwned" / "sub").mkdir(parents=True)
    (victim / "pwned" / "sub" / "kept.svg").write_text("<svg/>")
    (victim / "pwned.md").write_text("mine")
    climbing = f"../../../../{victim.relative_to(tmp_path.anchor)}/pwned"
    shard(tmp_path / "shards", vllm_version=climbing)
    before = {p: p.read_text() for p in files_under(tmp_path)}
    out = tmp_path / "out" / "a" / "b"
    status, lines = merge(capsys, tmp_path / "shards", "--out", out)
    assert status == 2
    assert lines == [
        f"matrix merge: refused: {tmp_path / 'shards' / 'vllm-0.33.0.shard-1-of-1.json'}: "
        f"vllm_version: {climbing[:60]!r} is not a vLLM version (such as 0.33.0 or "
        "0.34.0.dev1+g1a2b3c)"
    ]
    assert {p: p.read_text() for p in files_under(tmp_path)} == before
    assert not out.exists()


# Each field a report names something by, with a value that would lead out of the folder or
# off the line, and the key the refusal names.
NAMES = [
    ({"vllm_version": "0.33.0/../../x"}, "vllm_version: '0.33.0/../../x' is not a vLLM version"),
    ({"vllm_version": "0.33.0 and more"}, "is not how a report names vLLM 0.33.0"),
    ({"ships": "../x"}, "ships: '../x': not a variant"),
    ({"source": {"path": "/x", "kind": "../x"}}, "source.kind: Input should be 'checkout'"),
    ({"matrix_digest": "a\nb"}, "matrix_digest: 'a\\nb' holds control characters"),
    ({"cells": [{**cell("a"), "case": "../../x"}]}, "cells.0.case: '../../x' is not a case id"),
    ({"cells": [{**cell("a"), "variant": "x/../y"}]}, "cells.0.variant: 'x/../y' is not a varia"),
    ({"cells": [{**cell("a"), "model": "m\x1b[2J"}]}, "cells.0.model: 'm\\x1b[2J' holds control"),
    ({"cells": [{**cell("a"), "detail": "a\rb"}]}, "cells.0.detail: 'a\\rb' holds control"),
    ({"shard": {**PLACE, "selected": ["../a-stock"]}}, "shard.selected.0: "),
    ({"shard": {**PLACE, "selection": "../x"}}, "shard.selection: '../x' is not a selection"),
]


@pytest.mark.parametrize(("fields", "refusal"), NAMES, ids=[str(*f) for f, _ in NAMES])
def test_every_name_a_report_gives_is_checked_as_what_it_claims_to_be(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fields: dict[str, Any], refusal: str
) -> None:
    path = shard(tmp_path / "shards", **fields)
    status, lines = merge(capsys, path, "--out", tmp_path / "out")
    assert status == 2 and len(lines) == 1
    assert lines[0].startswith(f"matrix merge: refused: {path}: ") and refusal in lines[0]
    assert not (tmp_path / "out").exists()


def test_names_that_climb_stay_picture_names_inside_the_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model is a case's ``model:``, a path as often as not, and an axis label any text:
    the pictures' names are made of them (a model's strip, a failing cell's steps), and stay
    in the pictures folder."""
    monkeypatch.delenv("MATRIX_PICTURES")
    pytest.importorskip("matplotlib")
    model, case = "../../../../../victim/config.json", "a[k=../../../../victim/x]"
    steps = {"pool": 4, "groups": ["g"], "requests": ["r"], "steps": ["3:0", "2:1"], "marks": []}
    failing = {"observed": "fail", "kind": "stall", "as_expected": False, "failing_pools": [4]}
    cells = [
        {**cell(case), **failing, "model": model, "steps": [{**steps, "stopped": "stuck"}]},
        cell("b"),
    ]
    selected = {**PLACE, "selected": [f"{case}-stock", "b-stock"]}
    shard(tmp_path / "shards", cells, shard=selected)
    status, _ = merge(capsys, tmp_path / "shards", "--out", tmp_path / "out")
    assert status == 1  # the failing cell was expected to pass
    pictures = tmp_path / "out" / "vllm-0.33.0"
    written = files_under(tmp_path / "out")
    assert pictures / "pools-.._.._.._.._.._victim_config.json.svg" in written
    assert pictures / "cells" / "a_k=.._.._.._.._victim_x-stock.svg" in written
    assert files_under(tmp_path) == written | files_under(tmp_path / "shards")


def test_a_write_through_a_link_out_of_the_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Names are checked once resolved: a picture's path that is a link leading out is not
    written through, and an SVG outside is not deleted as stale."""
    monkeypatch.delenv("MATRIX_PICTURES")
    pytest.importorskip("matplotlib")
    outside = tmp_path / "victim.svg"
    outside.write_text("mine")
    pictures = tmp_path / "out" / "vllm-0.33.0"
    pictures.mkdir(parents=True)
    (pictures / "severity.svg").symlink_to(outside)
    shard(tmp_path / "shards")
    status, lines = merge(capsys, tmp_path / "shards", "--out", tmp_path / "out")
    assert status == 2
    assert lines[-1] == (
        f"matrix merge: cannot write the report: 'severity.svg' would be written outside {pictures}"
    )
    assert outside.read_text() == "mine"
    # The pictures' folder itself a link out: nothing written there, its SVGs kept.
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "cells").mkdir(parents=True)
    (elsewhere / "cells" / "old.svg").write_text("mine")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "vllm-0.33.0").symlink_to(elsewhere)
    status, lines = merge(capsys, tmp_path / "shards", "--out", linked)
    assert status == 2
    assert lines[-1] == (
        f"matrix merge: cannot write the report: 'vllm-0.33.0' would be written outside {linked}"
    )
    assert [p.name for p in elsewhere.rglob("*")] == ["cells", "old.svg"]
    with pytest.raises(ValueError, match="would be written outside"):
        inside(tmp_path, "../x")
    assert inside(tmp_path, "a/b.svg") == tmp_path / "a" / "b.svg"


@pytest.mark.parametrize(
    ("fields", "refusal"),
    [
        ({"fit": "11"}, "cells.0.fit: Input should be a valid integer"),
        ({"as_expected": "yes"}, "cells.0.as_expected: Input should be a valid boolean"),
        ({"failing_pools": [1.5]}, "cells.0.failing_pools.0: Input should be a valid integer"),
        ({"observed": "great"}, "cells.0.observed: Input should be 'pass', 'fail' or 'skip'"),
        (
            {"failures": [{"pool": 4, "kind": "stall"}]},
            "cells.0.failures.0.severity: Field required",
        ),
        ({"colour": "red"}, "cells.0.colour: not a field of a cell"),
        ({"steps": [{"pool": 4}]}, "cells.0.steps.0: not a run's steps (KeyError)"),
    ],
)
def test_a_cell_of_the_wrong_types_is_refused_at_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fields: dict[str, Any], refusal: str
) -> None:
    path = shard(tmp_path, [{**cell("a"), **fields}, cell("b")])
    status, lines = merge(capsys, path)
    assert status == 2 and lines == [f"matrix merge: refused: {path}: {refusal}"]


def test_a_run_s_steps_that_are_not_one_per_group_and_request_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = {"pool": 4, "groups": ["g"], "requests": ["a"], "steps": ["3:1,1"], "marks": []}
    path = shard(tmp_path, [{**cell("a"), "steps": [{**steps, "stopped": "stuck"}]}, cell("b")])
    status, lines = merge(capsys, path)
    assert status == 2
    assert lines == [
        f"matrix merge: refused: {path}: cells.0.steps.0.steps.0: not a block count per group "
        "(1) and request (1)"
    ]


@pytest.mark.parametrize(
    ("group", "splits", "refusal"),
    [
        (4, 3, "shard.group: 4 of 3, not 1 ... 3"),
        (1, 10_000_000, "shard.splits: 10,000,000 groups, not 1 ... 262,144"),
        (True, 1, "shard.group: True is not a whole number"),
        (1, 1, "shard.suite: '../x' is not a suite ('connectors', 'adequacy', 'sweep' or none)"),
    ],
)
def test_a_shard_s_place_in_its_split_is_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], group: Any, splits: int, refusal: str
) -> None:
    """``group 4 of 3`` merged; ``splits: 10000000`` printed one 89 MB line of absent groups."""
    suite = "../x" if "suite" in refusal else ""  # a suite names the merged report's file
    path = shard(tmp_path, shard={**PLACE, "group": group, "splits": splits, "suite": suite})
    status, lines = merge(capsys, path)
    assert status == 2 and lines == [f"matrix merge: refused: {path}: {refusal}"]


def test_absent_groups_are_a_range_and_a_shard_on_another_release_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 0.32.0 shard among 0.33.0 ones was "group 2 of 3 absent": its release differs."""
    write_shard(tmp_path, 1, [cell("a")], splits=3)
    write_shard(tmp_path, 3, [cell("c")], splits=3)
    other = write_shard(tmp_path, 2, [cell("b")], splits=3)
    report = json.loads(other.read_text())
    other.unlink()
    other = tmp_path / "vllm-0.32.0.shard-2-of-3.json"
    other.write_text(json.dumps({**report, "vllm_version": "0.32.0"}))
    status, lines = merge(capsys, tmp_path)
    assert status == 2
    given = ", ".join(str(tmp_path / f"vllm-0.33.0.shard-{k}-of-3.json") for k in (1, 3))
    assert lines == [
        f"matrix merge: refused: group 2 of 3 absent (given: {given}): {other} is group 2, but "
        "ran vLLM 0.32.0, not 0.33.0"
    ]
    (tmp_path / "many").mkdir()
    many = write_shard(tmp_path / "many", 1, [cell("a")], splits=9)
    status, lines = merge(capsys, many)
    assert lines[-1] == f"matrix merge: refused: group 2-9 of 9 absent (given: {many})"


def deep(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"vllm_version": "0.33.0", "cells": ' + "[" * 1000 + "]" * 1000 + "}")
    return path


def zero(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to("/dev/zero")
    return path


def fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)  # opened for reading, it would wait for a writer forever
    return path


UNREADABLE = {
    "deep": (deep, ":1: nested deeper than 32 levels"),  # was a RecursionError
    "zero": (zero, ":1: cannot read: a character device, not a regular file"),  # MemoryError
    "fifo": (fifo, ":1: cannot read: a FIFO, not a regular file"),  # waited forever
}


@pytest.mark.parametrize("kind", UNREADABLE)
def test_a_shard_that_cannot_be_read_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    make, line = UNREADABLE[kind]
    path = make(tmp_path / "vllm-0.33.0.shard-1-of-1.json")
    assert merge(capsys, tmp_path) == (2, [f"matrix merge: refused: {path}{line}"])


@pytest.mark.parametrize("kind", UNREADABLE)
def test_a_report_that_cannot_be_read_is_one_line_for_crossversion_and_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    make, line = UNREADABLE[kind]
    path = make(tmp_path / "reports" / "vllm-0.33.0.json")
    with pytest.raises(ReportError, match=f"^{re.escape(f'{path}{line}')}$"):
        load_reports([tmp_path / "reports"])
    assert main(["crossversion", str(tmp_path / "reports"), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().out == f"matrix crossversion: {path}{line}\n"
    finding = ["finding", "1", "--reports", str(tmp_path / "reports"), "--out", str(tmp_path / "f")]
    assert main(finding) == 2
    assert capsys.readouterr().err == f"matrix finding: {path}{line}\n"


def test_an_out_that_is_a_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``merge --out FILE`` raised FileExistsError."""
    taken = tmp_path / "taken"
    taken.write_text("")
    shard(tmp_path / "shards")
    assert merge(capsys, tmp_path / "shards", "--out", taken) == (
        2,
        [f"matrix merge: --out {taken}: not a folder"],
    )
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "vllm-0.33.0.json").write_text(json.dumps({"vllm_version": "0.33.0", "cells": []}))
    assert main(["crossversion", str(reports), "--out", str(taken)]) == 2
    assert (
        capsys.readouterr()
        .out.splitlines()[-1]
        .startswith(f"matrix crossversion: cannot write the report to --out {taken}: ")
    )


def test_a_shard_relabelled_as_a_whole_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Shard 1 of 3, relabelled ``group: 1, splits: 1``, merged into a "release report" of its
    own 7 of the run's 28 cells, exit 0 (refused when a shard listed its whole run's cells)."""
    cells = [cell(f"c{n}") for n in range(7)]
    path = write_shard(tmp_path, 1, cells, splits=3)
    report = json.loads(path.read_text())
    report["shard"].update(group=1, splits=1)
    path.write_text(json.dumps(report))
    assert merge(capsys, path) == (
        2,
        [
            f"matrix merge: refused: {path}: shard: group 1 of 1 with 7 selected cells is not the "
            "place it ran in (shard.place differs: its group, splits or cells were changed "
            "after the run)"
        ],
    )
    # Its cells cut down to match, or no place at all (a shard of an older matrix): refused.
    report["shard"].update(splits=3, selected=report["shard"]["selected"][:6])
    report["cells"] = report["cells"][:6]
    path.write_text(json.dumps(report))
    assert merge(capsys, path)[1][0].endswith("were changed after the run)")
    del report["shard"]["place"]
    path.write_text(json.dumps(report))
    assert merge(capsys, path) == (
        2,
        [
            f"matrix merge: refused: {path}: shard.place: None is not a place digest (a shard "
            "written by an older matrix: run it again)"
        ],
    )


def test_a_group_absent_as_another_suite_s_shard_is_named_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shard of the run whose suite says another: "ran vLLM 0.33.0, not 0.33.0"."""
    one = write_shard(tmp_path, 1, [cell("a")])
    name = "connectors-vllm-0.33.0.shard-2-of-2.json"
    two = write_shard(tmp_path, 2, [cell("b")], name=name, suite="connectors")
    status, lines = merge(capsys, tmp_path)
    assert (status, lines[-1]) == (  # the connectors' shards are merged first: named first
        2,
        f"matrix merge: refused: group 1 of 2 absent (given: {two}): {one} is group 1, but is "
        "of the shipped cases, not the connectors suite",
    )
