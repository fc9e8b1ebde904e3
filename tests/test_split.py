"""A split run takes whole files, chosen before collection: every file in exactly one part,
a shard's workers sharing out only the shard's files, every part with a file while there are
enough, and a selection digest that changes with any file, option or code."""

from __future__ import annotations

from pathlib import Path

import pytest

from matrix.case.split import (
    Part,
    file_durations,
    files_of,
    run_files,
    selection_digest,
)
from tests.helpers import CASES


def case_files(folder: Path, count: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"c{index:02d}.yaml" for index in range(count)]
    for path in paths:
        path.write_text(f"name: {path.stem}\n")
    return paths


def is_yaml(path: Path) -> bool:
    return path.suffix == ".yaml"


def test_every_file_is_in_one_part_and_a_shard_s_workers_share_out_its_own(tmp_path: Path) -> None:
    case_files(tmp_path / "cases", 11)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("")
    (tmp_path / "tests" / "helpers.py").write_text("")  # not a test module: not a run's file
    files = run_files([tmp_path], is_yaml)
    assert len(files) == 12 and files == sorted(files, key=lambda f: f.path)
    durations = {"cases/c03.yaml": 9.0, "cases/c07.yaml": 4.0}
    shards = [files_of(files, [Part(k, 3)], durations) for k in (1, 2, 3)]
    assert sorted(f.path for s in shards for f in s) == [f.path for f in files]
    assert all(shards)
    for k, shard in enumerate(shards, 1):
        for workers in (1, 2, 4):  # each machine its own number of workers
            parts = [[Part(k, 3), Part(w, workers)] for w in range(1, workers + 1)]
            shares = [files_of(files, both, durations) for both in parts]
            assert sorted(f.path for s in shares for f in s) == sorted(f.path for f in shard)


def test_the_longest_file_is_alone_when_it_outweighs_the_rest(tmp_path: Path) -> None:
    case_files(tmp_path, 4)
    files = run_files([tmp_path], is_yaml)
    recorded = {f"{tmp_path.name}/c{i:02d}.yaml::x-stock": 1.0 for i in range(1, 4)}
    recorded[f"{tmp_path.name}/c00.yaml::x-stock"] = 6.0
    recorded[f"{tmp_path.name}/c00.yaml::x-none"] = 4.0
    durations = file_durations(recorded)
    assert durations[f"{tmp_path.name}/c00.yaml"] == 10.0
    first = files_of(files, [Part(1, 2)], durations)
    second = files_of(files, [Part(2, 2)], durations)
    assert {len(first), len(second)} == {1, 3}


def test_the_selection_digest_follows_every_file_option_and_the_code(tmp_path: Path) -> None:
    paths = case_files(tmp_path, 2)
    before = selection_digest(run_files([tmp_path], is_yaml), "code", ["-k x"])
    assert before == selection_digest(run_files([tmp_path], is_yaml), "code", ["-k x"])
    assert before != selection_digest(run_files([tmp_path], is_yaml), "code", ["-k y"])
    assert before != selection_digest(run_files([tmp_path], is_yaml), "other", ["-k x"])
    paths[1].write_text("name: changed\n")
    assert before != selection_digest(run_files([tmp_path], is_yaml), "code", ["-k x"])


def test_a_worker_s_part_is_checked() -> None:
    assert Part.parse("2/3") == Part(2, 3)
    for bad in ("0/3", "4/3", "x/3", "3"):
        with pytest.raises(ValueError):
            Part.parse(bad)


def test_a_split_run_collects_only_its_own_files(pytester: pytest.Pytester) -> None:
    """Each part collects its own case files' cells, nothing of the others', and the parts
    together are the whole run (the named files are collected whatever the split says, and
    give no cells)."""
    names = ["single_group.yaml", "mamba_align.yaml", "mamba_none.yaml"]
    named = [str(CASES / name) for name in names]
    collected = []
    for group in (1, 2, 3):
        result = pytester.runpytest_inprocess(
            *named, "--splits=3", f"--group={group}", "--collect-only", "-q", "-p", "no:randomly"
        )
        ids = [line for line in result.stdout.lines if "::" in line]
        files = {line.split("::")[0].rsplit("/", 1)[-1] for line in ids}
        assert len(files) == 1, result.stdout.str()
        collected += ids
    whole = pytester.runpytest_inprocess(*named, "--collect-only", "-q", "-p", "no:randomly")
    assert sorted(collected) == sorted(line for line in whole.stdout.lines if "::" in line)
