"""``engine.max_num_scheduled_tokens`` (vLLM's --max-num-scheduled-tokens) reaches the
scheduler as its step's token budget, below the batch's size, and a bad value is one line."""

from __future__ import annotations

from typing import Any

import pytest

from matrix.case.expansion import cells_from_file
from matrix.case.loading import CaseFileError
from tests.helpers import WriteCase, needs_vllm, replaced

CAPPED = """\
name: capped
groups:
  - {kind: full, block_size: 4}
engine: {max_num_batched_tokens: 16, max_num_scheduled_tokens: 12}
pool: 20
requests:
  - {id: a, prompt: 12, async_load: false}
variants: [stock]
"""


@needs_vllm
def test_the_setting_is_the_steps_token_budget(adapter: Any, write_case: WriteCase) -> None:
    case = adapter.resolve(cells_from_file(write_case(CAPPED))[0].case.definition)
    scheduler = adapter.build(case, 20).scheduler
    assert scheduler.max_num_scheduled_tokens == 12
    assert scheduler.scheduler_config.max_num_batched_tokens == 16


def test_a_bad_value_is_one_line(write_case: WriteCase) -> None:
    path = write_case(
        replaced(CAPPED, ("max_num_scheduled_tokens: 12", "max_num_scheduled_tokens: 0"))
    )
    with pytest.raises(CaseFileError) as caught:
        cells_from_file(path)
    message = str(caught.value)
    assert "greater than" in message and "\n" not in message
    assert message.startswith(f"{path}:4: "), message
