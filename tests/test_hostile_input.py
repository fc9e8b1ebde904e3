"""Careless and hostile case files: one line each, at the right line, never a traceback, a hang
or a memory blow-up; valid cases beside them still run. The corpus is tests/corpus/, its
expected lines tests/corpus/expected.txt; files git cannot hold well are made here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from matrix.__main__ import main
from matrix.architectures import recorded
from matrix.case.expansion import cells_from_file
from matrix.case.limits import (
    LIMITS,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_HEAD_SIZE,
    MAX_HEADS,
    MAX_LAYERS,
    MAX_MATRIX_JOBS,
    MAX_MATRIX_PRODUCT,
    MAX_REPORT_BYTES,
    MAX_SPLITS,
    MAX_VALUES,
    MAX_WORKERS,
)
from matrix.releases import release_key
from matrix.variant_names import VARIANT_NAMES
from tests.helpers import REPO, needs_vllm, replaced, verdict_of

CORPUS = Path("tests", "corpus")  # relative: the lines name files as given, run from REPO
# The recorded releases' span, as a message names it: "{recorded}" in the expected lines.
RECORDED = f"{min(recorded(), key=release_key)}-{max(recorded(), key=release_key)}"
ENTRIES = [
    line.replace("{recorded}", RECORDED)
    for line in (REPO / CORPUS / "expected.txt").read_text().splitlines()
    if line and not line.startswith("#")
]
SMALL = """\
name: {name}
groups:
  - {{kind: full, block_size: 4}}
pool: 12
variants: [fixed]
requests:
  - {{id: a, prompt: 16}}
"""


@pytest.fixture(autouse=True)
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


SUMMARY = re.compile(r"^\d+ case files?, \d+ model files?: (ok|\d+ problems?)$")


def validate(paths: list[Path], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    status = main(["validate", *map(str, paths)])
    captured = capsys.readouterr()
    # stderr says only that vLLM is being imported, when it is
    assert all(line.startswith("validate: importing vLLM") for line in captured.err.splitlines())
    lines = captured.out.splitlines()
    assert SUMMARY.match(lines[-1]), lines[-1]
    return status, [line for line in lines[:-1] if ": ok, " not in line]


def unit(entry: str) -> Path:
    """What to validate for an entry: its file, or for the pair of same-named cases, the folder."""
    name = entry.split(":", 1)[0]
    return CORPUS / "same_name" if name.startswith("same_name/") else CORPUS / name


def test_the_corpus_covers_every_file_and_every_kind() -> None:
    named = {entry.split(":", 1)[0] for entry in ENTRIES}
    on_disk = {
        p.relative_to(CORPUS).as_posix()
        for pattern in ("*.yaml", "config.json")
        for p in CORPUS.rglob(pattern)
    }
    assert on_disk - named == {"same_name/first.yaml"}  # valid: the name it repeats is taken here
    assert named <= on_disk and len(ENTRIES) >= 30
    kinds = {name.split("_")[0] for name in named}
    assert {"syntax", "encoding", "types", "bounds", "refs", "structure", "hostile"} <= kinds


# Model files are checked against the installed vLLM and transformers too.
CHECKED = [
    pytest.param(entry, marks=needs_vllm if entry.startswith("models/installed_") else ())
    for entry in ENTRIES
]


@pytest.mark.parametrize("entry", CHECKED, ids=[e.split(":", 1)[0] for e in ENTRIES])
def test_each_malformed_file_gives_its_one_line(
    entry: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, errors = validate([unit(entry)], capsys)
    assert status == 1
    assert errors == [f"{CORPUS}/{entry}"]


@pytest.fixture
def made_here(tmp_path: Path) -> Iterator[dict[Path, str]]:
    """Malformed inputs git cannot hold well, each with its expected line."""
    made: dict[Path, str] = {}
    large = tmp_path / "too_large.yaml"
    large.write_text("# padding\n" * (MAX_FILE_BYTES // 10 + 1))
    made[large] = f"{large}:1: larger than {MAX_FILE_BYTES:,} bytes, the limit for a case"
    directory = tmp_path / "a_directory.yaml"
    directory.mkdir()
    made[directory] = f"{directory}:1: cannot read: Is a directory"
    fifo = tmp_path / "a_fifo.yaml"
    os.mkfifo(fifo)  # reading one would wait for a writer forever
    made[fifo] = f"{fifo}:1: cannot read: a FIFO, not a regular file"
    dangling = tmp_path / "dangling.yaml"
    dangling.symlink_to(tmp_path / "nowhere")
    made[dangling] = f"{dangling}:1: cannot read: No such file or directory"
    unreadable = tmp_path / "unreadable.yaml"
    if os.geteuid() == 0:  # root reads past permissions; this file fails every read instead
        unreadable.symlink_to("/proc/self/mem")
        made[unreadable] = f"{unreadable}:1: cannot read: Input/output error"
    else:
        unreadable.write_text(SMALL.format(name="unreadable"))
        unreadable.chmod(0)
        made[unreadable] = f"{unreadable}:1: cannot read: Permission denied"
    yield made
    for path in made:
        if path.is_file() and not path.is_symlink():
            path.chmod(0o644)


def test_unreadable_things_give_one_line(
    made_here: dict[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    for path, expected in made_here.items():
        assert validate([path], capsys) == (1, [expected])


def test_validate_over_everything_at_once_never_tracebacks(
    made_here: dict[Path, str], tmp_path: Path
) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(SMALL.format(name="good"))
    paths = [CORPUS, CORPUS / "same_name", CORPUS / "models", *made_here, good]
    run = subprocess.run(
        [sys.executable, "-m", "matrix", "validate", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=180,  # the model files' checks import vLLM
        check=False,
        cwd=REPO,
    )
    assert run.returncode == 1
    assert all(line.startswith("validate: importing vLLM") for line in run.stderr.splitlines())
    expected = {f"{CORPUS}/{entry}" for entry in ENTRIES} | set(made_here.values())
    *lines, summary = run.stdout.splitlines()
    assert SUMMARY.match(summary), summary
    assert {line for line in lines if ": ok, a model" not in line} == expected | {
        f"{CORPUS / 'same_name' / 'first.yaml'}: ok, 1 cells",
        f"{good}: ok, 1 cells",
    }


def test_limits_are_raised_explicitly_and_only_so_far(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(replaced(SMALL.format(name="big"), ("pool: 12", "pool: 100000")))
    with pytest.raises(Exception, match=r"pool: 100,000 blocks, over the limit of 65,536"):
        cells_from_file(path)
    path.write_text(path.read_text() + "limits: {pool: 100000}\n")
    assert len(cells_from_file(path)) == 1


def test_real_layouts_fit_the_default_limits(tmp_path: Path) -> None:
    """A 7-group model (Gemma-3's pattern) with 1,000-token prompts, a hybrid with 864-token
    attention blocks, and a 131,072-token context all validate without an override."""
    text = "\n".join(
        [
            "name: real",
            "max_model_len: 131072",
            "groups:",
            *["  - {kind: sliding_window, block_size: 16, window: 1024}"] * 6,
            "  - {kind: full, block_size: 16}",
            "pool: {start: 400, stop: 912}",
            "requests:",
            *[f"  - {{id: r{i}, prompt: 1000, max_tokens: 64}}" for i in range(4)],
            "matrix:",
            "  k: {path: fit_slack, values: [0, 7]}",
            "  b: {path: groups.6.block_size, values: [16, 672, 864]}",
        ]
    )
    path = tmp_path / "real.yaml"
    path.write_text(text + "\n")
    assert len(cells_from_file(path)) == 2 * 3 * len(VARIANT_NAMES)


MATRIX_BOUNDS = (MAX_MATRIX_JOBS, MAX_MATRIX_PRODUCT)  # a played workflow's strategy.matrix


def test_every_limit_is_documented() -> None:
    docs = (REPO / "docs" / "cases.md").read_text()
    for name, (default, ceiling, _) in LIMITS.items():
        assert f"| `{name}` | {default:,} | {ceiling:,} |" in docs
    bounds = (MAX_FILE_BYTES, MAX_VALUES, MAX_DEPTH, MAX_REPORT_BYTES, MAX_LAYERS, MAX_HEADS)
    for value in (*bounds, MAX_HEAD_SIZE, MAX_SPLITS, MAX_WORKERS, *MATRIX_BOUNDS):
        assert f"{value:,}" in docs


@needs_vllm
def test_a_cell_past_its_time_fails_naming_where_and_the_run_goes_on(
    adapter: Any, tmp_path: Path
) -> None:
    path = tmp_path / "slow.yaml"
    path.write_text(
        replaced(SMALL.format(name="slow"), ("pool: 12", "pool: {start: 11, stop: 12}"))
    )
    cell = cells_from_file(path)[0]
    assert verdict_of(adapter, cell).kind == "finished"  # and the fit is now cached
    ticks = iter(range(0, 10**9, 1000))  # every reading of the clock is 1,000 s later
    verdict = verdict_of(adapter, cell, clock=lambda: float(next(ticks)))
    assert (verdict.observed, verdict.kind, verdict.failing_pools) == ("fail", "timeout", (11,))
    assert verdict.detail.startswith(
        "slow-fixed ran past 300 s of CPU time (limits.seconds), pool 11, "
    )
    assert "at step 1: a " in verdict.detail and "blocks free" in verdict.detail


@needs_vllm
def test_a_slow_machine_does_not_turn_a_passing_cell_into_a_timeout(
    adapter: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard counts the cell's CPU time: a cell whose process waits (as one does on a busy
    machine) and whose wall clock races ahead still passes; the same cell on a wall clock times
    out, so the waiting really stretched it past its limit."""
    import time

    path = tmp_path / "waits.yaml"
    path.write_text(
        replaced(SMALL.format(name="waits"), ("pool: 12", "pool: 12\nlimits: {seconds: 1}"))
    )
    cell = cells_from_file(path)[0]
    build = adapter.build

    def descheduled(*args: Any, **kwargs: Any) -> Any:
        time.sleep(1.05)  # off the CPU: what another process's load does to this one
        return build(*args, **kwargs)

    monkeypatch.setattr(adapter, "build", descheduled)
    on_the_wall = verdict_of(adapter, cell, clock=time.monotonic)
    assert (on_the_wall.observed, on_the_wall.kind) == ("fail", "timeout")
    jumps = iter(range(0, 10**9, 1000))  # and every wall-clock reading is 1,000 s later
    monkeypatch.setattr(time, "monotonic", lambda: float(next(jumps)))
    verdict = verdict_of(adapter, cell)
    assert (verdict.observed, verdict.kind) == ("pass", "finished"), verdict.detail


@pytest.mark.once
@needs_vllm
def test_valid_cases_run_beside_malformed_ones(inline: pytest.Pytester) -> None:
    cases = inline.path / "cases"
    shutil.copytree(REPO / CORPUS, cases, ignore=shutil.ignore_patterns("*.txt"))
    (cases / "a_directory.yaml").mkdir()
    (cases / "valid.yaml").write_text(SMALL.format(name="valid"))
    inline.makefile(".ini", pytest="[pytest]\nmatrix_cases = cases\n")
    result = inline.runpytest_inprocess("-p", "no:cacheprovider", "-q", "--tb=line")
    # Every malformed case file is one failing item; valid.yaml and same_name/first.yaml run;
    # model files are never cases.
    cases_only = [entry for entry in ENTRIES if not entry.startswith("models/")]
    result.assert_outcomes(passed=2, failed=len(cases_only) + 1)
    out = result.stdout.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    for entry in cases_only:
        assert f"{cases}/{entry}".replace(f" {CORPUS}/", f" {cases}/") in out
    assert f"{cases / 'a_directory.yaml'}:1: cannot read: Is a directory" in out
