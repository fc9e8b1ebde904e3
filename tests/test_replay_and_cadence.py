"""Case keys for the adequacy cases of bounded replay and the prefill cadence: a sliding_window
group's ``bounded_replay`` (DeepSeek-V4.1's sliding window, ``SlidingWindowMLASpec``) and
``engine.prefill_schedule_interval`` (vLLM's ``--prefill-schedule-interval``)."""

from __future__ import annotations

from typing import Any

import pytest

from matrix.case.expansion import cells_from_file
from tests.helpers import WriteCase, assert_one_line_error, needs_vllm, replaced

REPLAY = """\
name: replay
groups:
  - {kind: full, block_size: 4}
  - {kind: sliding_window, block_size: 4, window: 8, bounded_replay: true}
engine: {prefill_schedule_interval: 4}
pool: 20
variants: [stock]
requests:
  - {id: a, prompt: 16, max_tokens: 4}
"""


@pytest.mark.parametrize(
    ("change", "line", "words"),
    [
        (
            ("{kind: full, block_size: 4}", "{kind: full, block_size: 4, bounded_replay: true}"),
            3,
            "'bounded_replay' is only for sliding_window groups, not full",
        ),
        (("bounded_replay: true", "bounded_replay: 1"), 4, "boolean"),
        (("prefill_schedule_interval: 4", "prefill_schedule_interval: 0"), 5, "greater than"),
    ],
)
def test_bad_replay_or_cadence_input_is_one_line(
    write_case: WriteCase, change: tuple[str, str], line: int, words: str
) -> None:
    assert_one_line_error(write_case(replaced(REPLAY, change)), line, words)


@needs_vllm
def test_bounded_replay_and_the_cadence_reach_the_scheduler(
    adapter: Any, write_case: WriteCase
) -> None:
    from vllm.v1.kv_cache_interface import SlidingWindowMLASpec

    case = cells_from_file(write_case(REPLAY))[0].case.definition
    if "bounded_replay" not in SlidingWindowMLASpec.__dataclass_fields__:
        assert "has no bounded replay" in (adapter.unsupported(case) or "")
        return
    assert adapter.unsupported(case) is None
    scheduler = adapter.build(adapter.resolve(case), 20).scheduler
    assert scheduler.scheduler_config.prefill_schedule_interval == 4
    assert scheduler.prefix_replay_tokens == 8
    window = scheduler.kv_cache_config.kv_cache_groups[1].kv_cache_spec
    assert isinstance(window, SlidingWindowMLASpec) and not window.prefix_cacheable
