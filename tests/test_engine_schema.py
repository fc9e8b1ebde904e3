"""The engine keys of a case: settings, draft acceptance, aborts, failed loads, prefixes.
Bad input is one line naming the file and the line of the offending item."""

from __future__ import annotations

from pathlib import Path

import pytest

from matrix.case.engine import accepted_drafts
from matrix.case.expansion import cells_from_file
from matrix.case.loading import CaseFileError
from tests.helpers import WriteCase, replaced

GOOD = """\
name: engine_demo
groups:
  - {kind: full, block_size: 4}
speculative: {method: eagle, num_tokens: 3, accept: [2, 0]}
engine: {async_scheduling: true, max_num_seqs: 4}
pool: 12
requests:
  - {id: a, prompt: 16, async_load: false}
  - {id: b, prompt: 24, prefix: {of: a, tokens: 8}, complete_load_after: 2}
events:
  - step: 1
  - fail_load: [b]
  - abort: [a]
  - run: {}
matrix:
  sched: {path: engine.async_scheduling, values: [false, true]}
"""


def problem(path: Path) -> tuple[int, str]:
    with pytest.raises(CaseFileError) as caught:
        cells_from_file(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:{caught.value.line}: ")
    return caught.value.line, message


def test_good_file_loads_and_engine_keys_are_axes(write_case: WriteCase) -> None:
    cells = cells_from_file(write_case(GOOD))
    by_id = {cell.test_id: cell.case.definition for cell in cells}
    assert by_id["engine_demo[sched=false]-stock"].engine.async_scheduling is False
    assert by_id["engine_demo[sched=true]-fixed"].engine.async_scheduling is True
    assert by_id["engine_demo[sched=true]-fixed"].engine.max_num_seqs == 4


@pytest.mark.parametrize(
    ("change", "line", "words"),
    [
        (("max_num_seqs: 4", "max_seqs: 4"), 5, "max_seqs"),
        (("abort: [a]", "abort: [zz]"), 13, "unknown requests: zz"),
        (("fail_load: [b]", "fail_load: [zz]"), 12, "unknown requests: zz"),
        (("accept: [2, 0]", "accept: [2, 0, 1, 1, 1]"), 4, "accept lists 5 steps"),
        (("accept: [2, 0]", "accept: [2, 4]"), 4, "only 3 are proposed"),
        (("prefix: {of: a, tokens: 8}", "prefix: {of: a, tokens: 20}"), 9, "longer than"),
        (("prefix: {of: a, tokens: 8}", "prefix: {of: zz, tokens: 8}"), 9, "not an earlier"),
        (("complete_load_after: 2", "complete_load_after: 0"), 9, "complete_load_after"),
    ],
)
def test_bad_engine_input_is_one_line(
    write_case: WriteCase, change: tuple[str, str], line: int, words: str
) -> None:
    found_line, message = problem(write_case(replaced(GOOD, change)))
    assert words in message
    assert found_line == line


def test_accepted_drafts_repeat_the_last_value() -> None:
    assert [accepted_drafts([2, 0, 1], step, 3) for step in range(5)] == [2, 0, 1, 1, 1]
    assert accepted_drafts("all", 7, 3) == 3
    assert accepted_drafts("none", 0, 3) == 0
    assert accepted_drafts([3], 0, 1) == 1  # never more than were proposed
