"""Shards and their merge: pytest-split's groups each write a shard report; merged, they are
exactly one run's report; shards that are not one run's are refused in one line. The run
command's plan, and its workers forked after vLLM's import, give the same report."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest

from matrix.__main__ import main
from matrix.case.expansion import cells_from_file
from matrix.case.split import place_digest
from matrix.report.info import run_info
from matrix.report.merge import cell_id, merge_shards
from matrix.report.shard_reports import MergeError, load_shard
from matrix.runner.plan import PlanError, plan_run
from tests.helpers import CASES, SUBSET, XDIST_VARIANTS, forked_main, needs_vllm

INI = "[pytest]\nmatrix_cases = cases\n"
SHARDED = ("single_group.yaml", "mamba_align.yaml", "mamba_none.yaml")  # a file a shard


def without_digest(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(path.read_text())
    report.pop("matrix_digest")
    return report


@pytest.mark.once
@needs_vllm
def test_three_shards_merged_are_one_run(inline: pytest.Pytester) -> None:
    inline.makefile(".ini", pytest=INI)
    (inline.path / "cases").mkdir()
    for name in SHARDED:
        shutil.copy(CASES / name, inline.path / "cases" / name)
    common = ("-p", "no:cacheprovider")
    # The Markdown under the name the merge gives it: its pictures' folder is named after it.
    single = inline.path / "one" / f"vllm-{run_info().vllm_version}"
    one = inline.runpytest_inprocess(
        *common, "--matrix-report=one.json", f"--matrix-report={single}.md"
    )
    assert one.ret == 0
    sizes = []
    for group in (1, 2, 3):
        shard = inline.runpytest_inprocess(
            *common,
            "--splits=3",
            f"--group={group}",
            f"--matrix-report=shards/s{group}.shard-{group}-of-3.json",
            f"--junitxml=shards/s{group}.xml",
        )
        assert shard.ret == 0
        sizes.append(
            len(load_shard(inline.path / "shards" / f"s{group}.shard-{group}-of-3.json").cells)
        )
    assert all(sizes) and sum(sizes) == len(
        json.loads((inline.path / "one.json").read_text())["cells"]
    )
    assert main(["merge", str(inline.path / "shards"), "--out", str(inline.path / "merged")]) == 0
    version = json.loads((inline.path / "one.json").read_text())["vllm_version"]
    merged = inline.path / "merged" / f"vllm-{version}"
    assert without_digest(Path(f"{merged}.json")) == without_digest(inline.path / "one.json")
    assert Path(f"{merged}.md").read_bytes() == Path(f"{single}.md").read_bytes()
    pictures = sorted(p.relative_to(single) for p in single.rglob("*.svg"))
    assert pictures == sorted(p.relative_to(merged) for p in merged.rglob("*.svg"))
    for picture in pictures:
        assert (merged / picture).read_bytes() == (single / picture).read_bytes()
    # Each shard's JUnit XML names every cell it ran with its headline facts, not its record.
    cases = ElementTree.parse(inline.path / "shards" / "s1.xml").getroot().iter("testcase")
    properties = [{p.get("name"): p.get("value") for p in case.iter("property")} for case in cases]
    assert len(properties) == sizes[0]
    for facts in properties:
        assert {"case", "variant", "expected", "observed", "severity", "failing_pools"} <= set(
            facts
        )
        assert "matrix_cell" not in facts
    assert any(f["severity"] != "none" and f["failing_pools"] for f in properties)


@pytest.mark.once
@needs_vllm
def test_a_shard_with_no_cell_of_the_filter_is_an_empty_shard(
    inline: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-k`` selecting cells of one file only: the other shards are empty shards (exit 0, a
    report selecting none, a line saying so), not pytest's no-tests exit 5; the merge of them
    all is the filter's cells; when every shard is empty the merge fails; a whole run with no
    cell still exits 5 unless told it may be empty (the CI player's filter, given to every
    suite's run)."""
    inline.makefile(".ini", pytest=INI)
    (inline.path / "cases").mkdir()
    for name in SHARDED:
        shutil.copy(CASES / name, inline.path / "cases" / name)
    common = ("-p", "no:cacheprovider", "-m", "stock")

    def shards(keyword: str, folder: str) -> list[int]:
        codes = []
        for group in (1, 2, 3):
            shard = inline.runpytest_inprocess(
                *common,
                "-k",
                keyword,
                "--splits=3",
                f"--group={group}",
                f"--matrix-report={folder}/s.shard-{group}-of-3.json",
            )
            codes.append(shard.ret)
            if not load_shard(inline.path / folder / f"s.shard-{group}-of-3.json").cells:
                assert "an empty shard, its report selecting none" in shard.stdout.str()
        return codes

    assert shards("single_group", "one") == [0, 0, 0]
    sizes = [len(load_shard(p).cells) for p in sorted((inline.path / "one").glob("*.json"))]
    assert sorted(sizes) == [0, 0, 3]  # single_group[k=1], [k=3], [k=7] under stock
    assert main(["merge", str(inline.path / "one"), "--out", str(inline.path / "m1")]) == 0
    assert shards("no_such_case", "none") == [0, 0, 0]
    assert main(["merge", str(inline.path / "none"), "--out", str(inline.path / "m2")]) == 1
    assert "every shard is empty: no cell of the selection ran" in capsys.readouterr().out
    whole = inline.runpytest_inprocess(*common, "-k", "no_such_case")
    assert whole.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    told = inline.runpytest_inprocess(*common, "-k", "no_such_case", "--matrix-may-be-empty")
    assert told.ret == 0 and "no cell of this selection here: an empty run" in told.stdout.str()


@needs_vllm
@pytest.mark.once
def test_forked_workers_report_what_one_process_does(adapter: Any, tmp_path: Path) -> None:
    """``matrix run`` with two workers forked after one import of vLLM, against one process:
    the same report, field by field, and the same Markdown. Each command runs in a fork of
    this process, which has imported vLLM: the command imports nothing again."""
    reports, outputs, junit = {}, {}, {}
    for workers in ("2", "0"):
        junit[workers] = tmp_path / f"junit-{workers}.xml"
        args = ["run", "--", "-k", "single_group", "-n", workers]
        done = forked_main([*args, f"--junitxml={junit[workers]}"], tmp_path)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert done.stdout.count("matrix: imported in") == 1
        outputs[workers] = done.stdout
        written = (tmp_path / "reports").rglob("*")
        reports[workers] = {
            str(p.relative_to(tmp_path)): p.read_bytes() for p in written if p.is_file()
        }
        shutil.rmtree(tmp_path / "reports")
    assert "(2 workers forked after the import)" in outputs["2"]
    # --junitxml without a split: the workers' files combined, one test case a cell.
    cases = {w: ElementTree.parse(junit[w]).getroot().iter("testcase") for w in junit}
    named = {w: sorted(c.get("name", "") for c in found) for w, found in cases.items()}
    assert named["2"] == named["0"] and len(named["0"]) == 28
    forked, alone = reports["2"], reports["0"]
    stem = next(name for name in alone if name.endswith(".json"))[: -len(".json")]
    assert forked[f"{stem}.md"] == alone[f"{stem}.md"]
    assert json.loads(forked[f"{stem}.json"]) == json.loads(alone[f"{stem}.json"])
    # The page and the pictures, too (those of Markdown's folder, when matplotlib is there).
    assert {n: b for n, b in forked.items() if not n.endswith(".json")} == {
        n: b for n, b in alone.items() if not n.endswith(".json")
    }


@needs_vllm
@pytest.mark.once
def test_shards_on_xdist_workers_record_the_whole_run(xdist_shard: Path) -> None:
    """pytest-xdist's controller collects nothing: a shard run on xdist's workers (a GPU each,
    on CI) still records the run's whole selection, so its shards merge."""
    shard = load_shard(xdist_shard)
    by_file = {
        name: [c.test_id for c in cells_from_file(CASES / name) if c.variant in XDIST_VARIANTS]
        for name in SUBSET
    }
    ran = {cell_id(c) for c in shard.cells}
    # Whole files, not all of them, as the workers collected them; and the run's selection.
    assert set(shard.shard.selected) == ran
    assert all(ran.issuperset(ids) or ran.isdisjoint(ids) for ids in by_file.values())
    assert 0 < len(ran) < sum(map(len, by_file.values()))
    assert len(shard.shard.selection) == 16


def cell(case: str, variant: str = "stock", digest: str = "d1") -> dict[str, Any]:
    return {
        "case": case,
        "column": None,
        "variant": variant,
        "expected": "pass",
        "expected_kind": None,
        "observed": "pass",
        "kind": "finished",
        "detail": "",
        "source": f"{case}.yaml:1",
        "as_expected": True,
        "case_digest": digest,
    }


def write_shard(
    folder: Path,
    group: int,
    cells: list[dict[str, Any]],
    selected: list[str] | None = None,
    splits: int = 2,
    digest: str = "code1",
    selection: str = "0123456789abcdef",
    name: str | None = None,
    suite: str = "",
) -> Path:
    path = folder / (name or f"vllm-0.33.0.shard-{group}-of-{splits}.json")
    if selected is None:
        selected = [f"{c['case']}-{c['variant']}" for c in cells]
    report = {
        "vllm_version": "0.33.0",
        "ships": "fixed",
        "matrix_digest": digest,
        "cells": cells,
        "tightness": {},
        "shard": {
            "group": group,
            "splits": splits,
            "selected": selected,
            "selection": selection,
            "suite": suite,
            "place": place_digest(selection, group, splits, selected),
        },
    }
    path.write_text(json.dumps(report))
    return path


def merged(*paths: Path) -> int:
    return len(merge_shards([load_shard(p) for p in paths]).cells)


def test_shards_that_make_the_run_merge(tmp_path: Path) -> None:
    one = write_shard(tmp_path, 1, [cell("a"), cell("b")])
    two = write_shard(tmp_path, 2, [cell("c")])
    assert merged(one, two) == 3


@pytest.mark.parametrize(
    ("second", "refusal"),
    [
        ({"group": 1}, r"both group 1 of 2: shards overlap"),
        ({"cells": [cell("b"), cell("c")]}, r"b-stock is in .* and in .*: shards overlap"),
        (
            {"cells": [], "selected": ["c-stock"]},
            r"1 of its 1 selected cells are not in it \(the first: c-stock\)",
        ),
        ({"selected": []}, r"c-stock was not selected by the run it is from"),
        ({"digest": "code2"}, r"different matrix code \(code1 vs code2\)"),
        ({"selection": "fedcba9876543210"}, r"shards of different selections"),
        ({"splits": 3}, r"different splits"),
        (
            {"cells": [cell("c", digest="d2"), cell("a", "none", digest="d2")]},
            r"a case file changed",
        ),
    ],
)
def test_shards_that_are_not_one_run_are_refused_in_one_line(
    tmp_path: Path, second: dict[str, Any], refusal: str
) -> None:
    (tmp_path / "1").mkdir()
    (tmp_path / "2").mkdir()
    one = write_shard(tmp_path / "1", 1, [cell("a"), cell("b")])
    options: dict[str, Any] = {"group": 2, "cells": [cell("c")]}
    options.update(second)
    two = write_shard(tmp_path / "2", **options)
    with pytest.raises(MergeError, match=refusal) as refused:
        merged(one, two)
    assert "\n" not in str(refused.value)


def test_a_missing_group_is_named(tmp_path: Path) -> None:
    one = write_shard(tmp_path, 1, [cell("a"), cell("b")])
    with pytest.raises(MergeError, match=r"group 2 of 2 absent"):
        merged(one)


def test_a_shard_without_its_run_s_selection_is_refused(tmp_path: Path) -> None:
    old = write_shard(tmp_path, 1, [cell("a")])
    report = json.loads(old.read_text())
    del report["shard"]["selection"]  # as a shard of the matrix before selection digests
    old.write_text(json.dumps(report))
    with pytest.raises(MergeError, match=r"shard.selection: None is not a selection digest"):
        load_shard(old)


def test_each_suite_s_shards_merge_into_its_own_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connector cases' shards beside the shipped cases' of the same release are two runs,
    each merged into its suite's report, not one run refused for two selections."""
    monkeypatch.setenv("MATRIX_PICTURES", "off")  # the property is the reports' names
    write_shard(tmp_path, 1, [cell("a")])
    write_shard(tmp_path, 2, [cell("b")])
    for group in (1, 2):
        write_shard(
            tmp_path,
            group,
            [cell(f"c{group}")],
            selection="fedcba9876543210",
            name=f"connectors-vllm-0.33.0.shard-{group}-of-2.json",
            suite="connectors",
        )
    out = tmp_path / "out"
    assert main(["merge", str(tmp_path), "--out", str(out)]) == 0
    assert capsys.readouterr().out.count("merged 2 shards, 2 cells") == 2
    for stem, cases in (("vllm-0.33.0", {"a", "b"}), ("connectors-vllm-0.33.0", {"c1", "c2"})):
        report = json.loads((out / f"{stem}.json").read_text())
        assert {c["case"] for c in report["cells"]} == cases


def test_a_folder_s_shards_are_known_by_their_field_and_the_rest_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shard saved under another name still counts; a release's report or another JSON file
    beside the shards is skipped, and what the merge does not read (a subfolder, a shard saved
    as .JSON) is named, so an absent group is never a file passed over in silence."""
    write_shard(tmp_path, 1, [cell("a")])
    write_shard(tmp_path, 2, [cell("b")], name="shard2.json")
    (tmp_path / "vllm-0.33.0.json").write_text(
        json.dumps({"vllm_version": "0.33.0", "ships": "fixed", "cells": [], "tightness": {}})
    )
    (tmp_path / "notes.json").write_text(json.dumps({"x": 1}))
    (tmp_path / "shard3.JSON").write_text("{}")
    (tmp_path / "later").mkdir()
    assert main(["merge", str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "merged 2 shards, 2 cells" in out
    skipped = [
        line.removeprefix("matrix merge: skipped ").removeprefix(f"{tmp_path}/")
        for line in out.splitlines()
        if line.startswith("matrix merge: skipped ")
    ]
    assert [line.split(":")[0] for line in skipped] == [
        "later",
        "shard3.JSON",
        "notes.json",
        "vllm-0.33.0.json",
    ]
    assert "not a .json file in the folder" in skipped[0]
    assert "not a matrix JSON report (no cells)" in skipped[2]
    assert "not a shard report" in skipped[3]


def test_merge_says_what_is_wrong_with_a_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "whole.json").write_text(json.dumps({"vllm_version": "0.33.0", "cells": []}))
    assert main(["merge", str(tmp_path / "broken.json")]) == 2
    assert main(["merge", str(tmp_path / "whole.json")]) == 2
    assert main(["merge", str(tmp_path / "nothing")]) == 2
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("matrix merge: refused: ")
    assert "broken.json:1: the JSON ends before it is complete" in lines[0]
    assert "not a shard report" in lines[1] and "--splits N --group K" in lines[1]
    assert lines[2].endswith("nothing:1: cannot read: No such file or directory")
    assert len(lines) == 3


@pytest.mark.parametrize(
    ("args", "workers", "shard", "xdist"),
    [
        ([], 2, None, False),
        (["-n", "0"], 1, None, False),
        (["-n", "3", "-k", "x"], 3, None, False),
        (["--splits", "3", "--group", "2"], 2, (2, 3), False),
        (["--splits=3", "--group=3", "-n", "auto"], 2, (3, 3), False),
        (["--matrix-gpus", "0,1", "-n", "2"], 2, None, True),
        (["--store-durations"], 1, None, False),
    ],
)
def test_the_run_plan(
    args: list[str], workers: int, shard: tuple[int, int] | None, xdist: bool
) -> None:
    plan = plan_run(args, environ={}, cpus=2)
    assert (plan.workers, plan.shard, plan.xdist) == (workers, shard, xdist)
    assert not {"-n", "--splits", "--group"} & set(plan.pytest_args)


def test_a_shard_s_workers_are_given_the_shard() -> None:
    plan = plan_run(["--splits", "3", "--group", "2", "-n", "2"], environ={}, cpus=2)
    assert plan.shard_args() == ["--splits=3", "--group=2"]
    assert plan_run(["-n", "4"], environ={}, cpus=2).shard_args() == []


def test_several_visible_gpus_keep_xdist_workers() -> None:
    assert plan_run([], environ={"CUDA_VISIBLE_DEVICES": "0,1"}, cpus=4).xdist


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--splits", "3"], "go together"),
        (["--splits", "3", "--group", "4"], "one of 1 ... 3"),
        (["-n", "many"], "a number of workers"),
        (["-n", "-1"], "-n -1: a number of workers from 0 .this process alone. to 256"),
        (["-n", "100000"], "-n 100000: a number of workers"),
        (["--splits", "0", "--group", "1"], "--splits 0: a number of shards from 1 to 1024"),
        (["--splits", "1000000000", "--group", "1"], "--splits 1000000000: a number of shards"),
        (["--splits", "x", "--group", "1"], "argument --splits: invalid int value: 'x'"),
    ],
)
def test_arguments_the_plan_cannot_honour(args: list[str], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        plan_run(args, environ={}, cpus=2)
