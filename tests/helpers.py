"""What the test modules share: paths, the vLLM marker, and text helpers that fail loudly."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

if TYPE_CHECKING:
    from matrix.case.expansion import Cell
    from matrix.judge.verdict import Verdict

REPO = Path(__file__).resolve().parent.parent
CASES = REPO / "cases"
HAVE_VLLM = importlib.util.find_spec("vllm") is not None
needs_vllm = pytest.mark.skipif(not HAVE_VLLM, reason="vLLM is not installed (use tox -e tests)")


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
