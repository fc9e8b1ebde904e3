"""What the test modules share: paths, the vLLM marker, and text helpers that fail loudly."""

from __future__ import annotations

import importlib.util
import io
import os
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

if TYPE_CHECKING:
    from matrix.case.expansion import Cell
    from matrix.judge.verdict import Verdict

REPO = Path(__file__).resolve().parent.parent
CASES = REPO / "cases"
HAVE_VLLM = importlib.util.find_spec("vllm") is not None
# A test that drives vLLM: skipped without it, and run on each release's env (tests/conftest.py
# marks the tests using the vLLM fixtures alike; the rest run on one release only).
needs_vllm = pytest.mark.vllm
NO_VLLM = "vLLM is not installed (use tox -e tests)"


# A small two-group case the plugin and variant tests run end to end (6 cells, a few seconds).
TWO_GROUP_CASE = """\
name: small
column: Multiple groups
groups:
  - {kind: full, block_size: 4}
  - {kind: full, block_size: 4}
speculative: {method: eagle, num_tokens: 1}
pool: {start: 8, stop: 14}
requests:
  - {id: a, prompt: 16}
expect: {none: fail, original: fail}
"""

# Shipped cases of every kind: one group, two, Mamba, an engine scenario, a described model.
SUBSET = (
    "single_group.yaml",
    "mamba_align.yaml",
    "async_two_loads.yaml",
    "model_llama-4-scout.yaml",
)
# The suite's one pytest-xdist run (the ``xdist_shard`` fixture): a shard of those cases'
# cells under two variants.
XDIST_VARIANTS = ("stock", "none")
XDIST_RUN = (
    *(str(CASES / name) for name in SUBSET),
    *("-m", " or ".join(XDIST_VARIANTS)),
    *("--splits=2", "--group=1"),
)


class WriteCase(Protocol):
    """The ``write_case`` fixture: writes ``text`` to a file in the test's folder."""

    def __call__(self, text: str, name: str = "case.yaml") -> Path: ...


def replaced(text: str, *pairs: tuple[str, str]) -> str:
    """``text`` with each ``(old, new)`` replaced; fails when ``old`` is absent, so a changed
    fixture cannot make a test silently test nothing."""
    for old, new in pairs:
        assert old in text, f"{old!r} is not in the text to change"
        text = text.replace(old, new)
    return text


def assert_one_line_error(path: Path, line: int, words: str) -> None:
    """Loading ``path`` fails with one line naming the file and ``line``, holding ``words``."""
    from matrix.case.expansion import cells_from_file
    from matrix.case.reading import CaseFileError

    with pytest.raises(CaseFileError) as caught:
        cells_from_file(path)
    message = str(caught.value)
    assert words in message and "\n" not in message
    assert message.startswith(f"{path}:{line}: "), message


def verdict_of(adapter: Any, cell: Cell, **options: Any) -> Verdict:
    """A cell run and judged, as the plugin does it."""
    from matrix.judge.verdict import judge_run
    from matrix.run.cell import run_cell

    return judge_run(run_cell(adapter, cell, **options))


_shipped: dict[str, Verdict] = {}


def shipped_verdict(adapter: Any, cell: Cell) -> Verdict:
    """A shipped cell's verdict, run once per test process: tests that only read a shipped
    cell's verdict share it."""
    if cell.test_id not in _shipped:
        _shipped[cell.test_id] = verdict_of(adapter, cell)
    return _shipped[cell.test_id]


@dataclass(frozen=True)
class Finished:
    """How a forked command ended: its exit code and what it wrote."""

    returncode: int
    stdout: str
    stderr: str


def forked_main(args: list[str], cwd: Path) -> Finished:
    """``python -m matrix ARGS`` in ``cwd``, run in a fork of this process: a process of its
    own (its exit, its output, what it imports or changes are its own) without a new
    interpreter's vLLM import, which the test process has paid already (``adapter``)."""
    from matrix.__main__ import main

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the command, whose output pytest's capture never sees
            code = 3
            try:
                os.chdir(cwd)
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
                sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
                code = main(args)
            except SystemExit as ended:
                code = ended.code if isinstance(ended.code, int) else 1
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        texts = []
        for written in (out, err):
            written.seek(0)
            texts.append(written.read().decode(errors="replace"))
    return Finished(os.waitstatus_to_exitcode(status), *texts)
