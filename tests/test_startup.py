"""The smallest pool vLLM's start-up sizing gives an engine serving a case's requests, against
the release's own ``get_kv_cache_configs``, and what a cell records of it."""

from __future__ import annotations

from typing import Any

import pytest

from matrix.case.loading import load_case_file
from matrix.run.fit import measure_fit
from tests.helpers import WriteCase, needs_vllm
from tests.test_mamba_layers import mamba2_checkpoints

pytestmark = needs_vllm

# One full-attention group of 4-token blocks: an engine sized for 16 + 4 tokens and 3
# speculative ones holds ceil(23 / 4) = 6 blocks for one request, plus the null block.
WRITTEN = """\
name: written
groups:
  - {kind: full, block_size: 4}
speculative: {method: eagle, num_tokens: 3}
pool: 8
requests:
  - {id: a, prompt: 16, max_tokens: 4}
  - {id: b, prompt: 8, max_tokens: 2}
"""

# Nemotron-Nano-9B-v2 in align mode: one attention group and seven Mamba groups of four
# layers (27 Mamba layers, padded to 28 by the grouping).
NEMOTRON = """\
name: nemotron
model: nemotron-nano-9b-v2
layout: {{mamba_mode: align}}
max_model_len: 4096
pool: 30
requests:
  - {{id: a, prompt: {prompt}, max_tokens: 5}}
"""


def case_of(write_case: WriteCase, text: str) -> Any:
    return load_case_file(write_case(text))[1]


def test_written_groups_are_sized_for_the_longest_request(
    adapter: Any, write_case: WriteCase
) -> None:
    startable = adapter.startable(case_of(write_case, WRITTEN))
    assert startable.blocks == 6 + 1
    assert "max_model_len 23" in startable.reason


def test_a_described_model_is_sized_by_the_release_s_own_path(
    adapter: Any, write_case: WriteCase
) -> None:
    case = case_of(write_case, NEMOTRON.format(prompt=3936))
    startable = adapter.startable(case)
    # The attention group holds ceil(3941 / 1312) = 4 blocks, each Mamba group 2 in align
    # mode, and from 0.32 MambaMixer2's prefill checkpoint block: 4 + 7 * 2 (or 3) + the null
    # block. The layers alone (4 * 4 + 27 * 2 = 17.5 groups' worth) would give 18 before
    # 0.32: the grouping's padding is what the engine checks.
    checkpoint = int(mamba2_checkpoints())
    assert startable.blocks == 4 + 7 * (2 + checkpoint) + 1
    assert "get_kv_cache_configs" in startable.reason
    # The request fits in 19: before 0.32 the engine starts exactly there; from 0.32 it asks
    # for the checkpoint blocks too, which this loaded prompt never takes (no prefill pass).
    assert measure_fit(adapter, adapter.resolve(case).served()).blocks == 19


def test_a_cell_records_the_startable_pool_and_judges_against_it(
    adapter: Any, write_case: WriteCase
) -> None:
    from matrix.case.expansion import cells_from_file
    from tests.helpers import verdict_of

    path = write_case(WRITTEN.replace("pool: 8", "pool: {start: 4, stop: 9}"))
    cell = next(c for c in cells_from_file(path) if c.variant == "none")
    verdict = verdict_of(adapter, cell)
    assert verdict.startable == 7
    assert all(f.severity != "sizer" or f.pool >= 7 for f in verdict.failures)


def test_a_layout_vllm_cannot_derive_has_no_figure_and_says_why(
    adapter: Any, write_case: WriteCase
) -> None:
    case = case_of(write_case, NEMOTRON.format(prompt=3936))
    broken = case.model_copy(
        update={"described": case.described.model_copy(update={"architecture": "NoSuchLM"})}
    )
    startable = adapter.startable(broken)
    assert startable.blocks is None
    assert "NoSuchLM" in startable.reason


@pytest.mark.parametrize("prompt", [1312, 1313])
def test_the_sizing_is_cached_per_case_content(
    adapter: Any, write_case: WriteCase, prompt: int
) -> None:
    case = case_of(write_case, NEMOTRON.format(prompt=prompt))
    assert adapter.startable(case) is adapter.startable(case.model_copy(update={"pool": 12}))


# Found by explore --deployable on 0.33 (seed 0): request c, preempted by the others, needs
# more than the pool to resume at max_model_len 1024 (its draft slots are not capped), but
# finishes on an engine sized for these requests, which starts with exactly this pool.
PREEMPTED = """\
name: preempted
groups:
  - {kind: full, block_size: 4}
speculative: {method: draft_model, num_tokens: 4}
requests:
  - {id: a, prompt: 1, async_load: true, max_tokens: 2}
  - {id: b, prompt: 1, async_load: false, max_tokens: 2}
  - {id: c, prompt: 5, async_load: false, max_tokens: 5}
events:
  - {step: 3}
  - {step: 3}
  - run: {max_steps: 200}
pool: 5
variants: [stock]
"""


def test_a_hang_only_the_longer_max_model_len_has_is_no_deadlock(
    adapter: Any, write_case: WriteCase
) -> None:
    from matrix.case.expansion import cells_from_file
    from tests.helpers import verdict_of

    (cell,) = cells_from_file(write_case(PREEMPTED))
    verdict = verdict_of(adapter, cell)
    assert (verdict.fit, verdict.startable) == (5, 5)
    if verdict.observed == "fail":  # the release hangs at 1024 (0.31-0.33)
        assert [(f.pool, f.kind, f.severity) for f in verdict.failures] == [
            (5, "preempted", "undersized")
        ]
        assert verdict.severity is None
