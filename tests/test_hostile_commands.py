"""Hostile input to the commands that take files and flags besides cases and reports: the CI
player's workflow and ``--out``, the sweep's baseline and flags, ``finding --reports``, a case
path handed to ``connectors``. Each is one line naming the input and the problem, a non-zero
exit, in bounded time and memory (the player runs in a process with a memory ceiling and a
timeout: a FIFO waited on, or ``/dev/zero`` read whole, would fail its test, not hang it)."""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from matrix.case.limits import MAX_MATRIX_JOBS, MAX_MATRIX_PRODUCT
from matrix.ci.workflow import WorkflowError, expand_matrix
from tests.helpers import REPO

MEMORY = 1 << 30  # bytes of address space a command gets here: /dev/zero read whole needs more
SECONDS = 60

# A workflow whose one job's matrix has nine lists of ten values: a billion combinations
# (itertools.product took 4 GB before the jobs were counted).
WIDE = "\n".join(
    [
        "on: push",
        "jobs:",
        "  wide:",
        "    runs-on: ubuntu-latest",
        "    strategy:",
        "      matrix:",
        *[f"        {name}: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]" for name in "abcdefghi"],
        "    steps:",
        "      - run: echo ${{ matrix.a }}",
        "",
    ]
)


def bounded() -> None:
    """In the child, before it runs: a ceiling on its memory."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def command(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``python -m ARGS`` in a process of bounded memory and time."""
    return subprocess.run(
        [sys.executable, "-m", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=SECONDS,
        check=False,
        cwd=REPO,
        preexec_fn=bounded,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The command's only line of output (on either stream)."""
    lines = (done.stdout + done.stderr).splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def play(tmp_path: Path, workflow: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return command("matrix.ci.play", workflow, "--repo", REPO, "--out", tmp_path / "out", *args)


def test_a_workflow_that_cannot_be_read_is_one_line(tmp_path: Path) -> None:
    """A link to /dev/zero (a MemoryError once), a FIFO (waited on forever), a folder."""
    zero, fifo, folder = tmp_path / "zero.yml", tmp_path / "fifo.yml", tmp_path / "folder.yml"
    zero.symlink_to("/dev/zero")
    os.mkfifo(fifo)
    folder.mkdir()
    for path, problem in [
        (zero, "a character device, not a regular file"),
        (fifo, "a FIFO, not a regular file"),
        (folder, "Is a directory"),
    ]:
        done = play(tmp_path, path)
        assert (done.returncode, one_line(done)) == (2, f"play: {path}:1: cannot read: {problem}")
    assert not (tmp_path / "out" / "checkout").exists()  # refused before anything was copied


def test_a_matrix_too_large_to_play_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    workflow = tmp_path / "wide.yml"
    workflow.write_text(WIDE)
    done = play(tmp_path, workflow)
    assert (done.returncode, one_line(done)) == (
        2,
        f"play: {workflow}: job wide: matrix: its 9 lists make 1,000,000,000 combinations, "
        f"over the {MAX_MATRIX_PRODUCT:,} this player expands (GitHub runs at most "
        f"{MAX_MATRIX_JOBS} jobs of a matrix)",
    )
    assert not (tmp_path / "out" / "checkout").exists()


@pytest.mark.parametrize(
    ("matrix", "refusal"),
    [
        ({"a": list(range(16)), "b": list(range(17))}, "matrix: 272 jobs, over the 256 GitHub"),
        ({"a": [1], "include": [{"b": n} for n in range(257)]}, "matrix.include: 257 entries"),
        ({"a": [1], "exclude": "a"}, "matrix.exclude: 'a' is not a list of mappings"),
        ({"a": [1], "include": [1]}, "matrix.include: [1] is not a list of mappings"),
        ("${{ fromJSON(x) }}", "matrix: '${{ fromJSON(x) }}' is not a mapping"),
    ],
)
def test_a_matrix_github_would_not_run_is_refused(matrix: object, refusal: str) -> None:
    with pytest.raises(WorkflowError, match=f"^{re.escape(refusal)}"):
        expand_matrix(matrix)  # type: ignore[arg-type]


def test_an_out_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    """``--out FILE`` raised FileExistsError."""
    taken = tmp_path / "taken"
    taken.write_text("")
    workflow = tmp_path / "wide.yml"
    workflow.write_text(WIDE)
    done = command("matrix.ci.play", workflow, "--repo", REPO, "--out", taken)
    assert (done.returncode, one_line(done)) == (2, f"play: --out {taken}: not a folder")
