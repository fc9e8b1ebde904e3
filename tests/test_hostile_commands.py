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
from typing import Any

import pytest

from matrix.__main__ import main
from matrix.case.baselines import Row, write_baseline
from matrix.case.limits import MAX_MATRIX_JOBS, MAX_MATRIX_PRODUCT
from matrix.ci.workflow import WorkflowError, expand_matrix
from tests.helpers import REPO, needs_vllm

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


def matrix_command(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    """``python -m matrix ARGS`` in this process: its exit and its only line of output."""
    code = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    lines = (captured.out + captured.err).splitlines()
    assert len(lines) == 1, lines
    return code, lines[0]


def unreadable(folder: Path) -> dict[Path, str]:
    """Files that are no baseline, each with what reading it says."""
    folder.mkdir()
    zero, fifo, directory = folder / "zero.tsv", folder / "fifo.tsv", folder / "folder.tsv"
    zero.symlink_to("/dev/zero")
    os.mkfifo(fifo)
    directory.mkdir()
    latin = folder / "latin.tsv"
    latin.write_bytes(b"# architecture\nCaf\xe9ForCausalLM\ttext\tllama\tlayout\tfull/16\n")
    return {
        folder / "missing.tsv": "1: cannot read: No such file or directory",
        zero: "1: cannot read: a character device, not a regular file",
        fifo: "1: cannot read: a FIFO, not a regular file",
        directory: "1: cannot read: Is a directory",
        latin: "2: not UTF-8 text: byte 0xe9 cannot be decoded",
    }


@needs_vllm  # installed: the sweep reads the baseline for the installed release
def test_a_baseline_that_does_not_read_is_refused_before_the_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing, FIFO, /dev/zero or folder baseline was ignored, and the run advised --record
    (which writes the committed baseline); a non-UTF-8 one raised UnicodeDecodeError."""
    for path, problem in unreadable(tmp_path / "baselines").items():
        assert matrix_command(capsys, "sweep", "--only", "OPTForCausalLM", "--baseline", path) == (
            2,
            f"matrix sweep: {path}:{problem}",
        )


@pytest.mark.parametrize(
    ("args", "refusal"),
    [
        (["--jobs", "-3"], "--jobs -3: a number of workers from 1 to 256"),
        (["--jobs", "0"], "--jobs 0: a number of workers from 1 to 256"),
        (["--only", ""], "--only '': not an architecture the sweep covers here"),
        (["--only", "A\x1b[2J"], "--only 'A\\x1b[2J': not an architecture the sweep covers here"),
        (["--part", "3"], "--part 3: 1 to 2"),
    ],
)
def test_a_flag_the_sweep_cannot_honour_is_refused_before_vllm_is_imported(
    capsys: pytest.CaptureFixture[str], args: list[str], refusal: str
) -> None:
    """``--jobs -3`` ran quietly; ``--only ""`` said every architecture was as the baseline
    has it, and exited 0."""
    assert matrix_command(capsys, "sweep", *args) == (2, f"matrix sweep: {refusal}")


def test_a_json_that_is_a_folder_is_refused_before_the_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--json FOLDER`` raised IsADirectoryError once the sweep was done."""
    assert matrix_command(capsys, "sweep", "--json", tmp_path) == (
        2,
        f"matrix sweep: --json {tmp_path}: a folder, not a file to write",
    )


@needs_vllm
def test_only_an_architecture_out_of_scope_is_refused_naming_it(
    adapter: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--only NoSuchArch`` derived nothing and exited 0, every architecture "as the baseline
    has it"."""
    code = main(["sweep", "--only", "OPTForCausalLM", "OPTForCausalLMM"])
    err = capsys.readouterr().err.splitlines()
    assert (code, err[-1]) == (
        2,
        "matrix sweep: --only 'OPTForCausalLMM': not an architecture the sweep covers here: "
        "did you mean OPTForCausalLM?",
    )
    assert all(line.startswith("sweep: importing vLLM") for line in err[:-1]), err


@needs_vllm  # installed: the sweep reads the baseline for the installed release
def test_a_baseline_s_names_are_printed_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An architecture named with a terminal's escapes in a baseline was printed raw. The sweep
    itself is not what is tested: its rows are given."""
    from matrix.sweep import command as sweep_command

    swept = [Row("OPTForCausalLM", "text", "opt", "layout", "full/16")]
    monkeypatch.setattr(sweep_command, "swept_rows", lambda jobs, cached: swept)
    baseline = tmp_path / "baseline.tsv"
    write_baseline(baseline, [*swept, Row("Evil\x1b[2JForCausalLM", "text", "x", "layout", "a")])
    assert main(["sweep", "--baseline", str(baseline)]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "  Evil\\x1b[2JForCausalLM: gone (was layout: a)" in out.splitlines()


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_case_that_is_no_file_given_to_connectors_is_said_as_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """pytest said ``ERROR: not found: .../fifo.yaml``, after vLLM's import."""
    path = tmp_path / f"{kind}.yaml"
    if kind == "fifo":
        os.mkfifo(path)
        problem = "a FIFO, not a regular file"
    else:
        path.symlink_to("/dev/zero")
        problem = "a character device, not a regular file"
    for command, suite in (["connectors", "--"], "connectors"), (["run", "--"], "run"):
        assert matrix_command(capsys, *command, path, "-n", "0") == (
            int(pytest.ExitCode.USAGE_ERROR),
            f"matrix {suite}: {path}: cannot read: {problem}",
        )


@pytest.mark.parametrize("kind", ["missing", "zero"])
def test_finding_reports_that_do_not_read_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """``finding --reports`` naming a missing path or /dev/zero wrote the body without a
    measured table, and exited 0."""
    path = tmp_path / kind
    if kind == "zero":
        path.symlink_to("/dev/zero")
    problem = {
        "missing": "No such file or directory",
        "zero": "a character device, not a regular file",
    }[kind]
    out = tmp_path / "finding.md"
    assert matrix_command(capsys, "finding", "1", "--reports", path, "--out", out) == (
        2,
        f"matrix finding: {path}:1: cannot read: {problem}",
    )
    assert not out.exists()
