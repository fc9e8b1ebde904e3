"""Two case keys reach vLLM as an engine sets them: a Mamba group's ``prefill_checkpoint`` (the
state a Mamba2 layer exports from inside a prefill chunk) and
``engine.prefix_cache_retention_interval`` (which Mamba and sliding-window checkpoints are
kept, and which chunks reserve a checkpoint block)."""

from __future__ import annotations

from typing import Any

import pytest

from matrix.case.loading import load_case_file
from matrix.case.reading import CaseFileError
from tests.helpers import WriteCase, needs_vllm, replaced

HYBRID = """\
name: checkpoint
groups:
  - {kind: full, block_size: 4}
  - {kind: mamba, block_size: 4, mamba_mode: align, prefill_checkpoint: true}
engine: {prefix_cache_retention_interval: 0}
pool: 24
requests:
  - {id: a, prompt: 16}
"""


def test_prefill_checkpoint_is_a_mamba_group_key(write_case: WriteCase) -> None:
    text = replaced(
        HYBRID,
        (
            "  - {kind: full, block_size: 4}",
            "  - {kind: full, block_size: 4, prefill_checkpoint: true}",
        ),
    )
    with pytest.raises(CaseFileError) as caught:
        load_case_file(write_case(text))
    assert caught.value.line == 3
    assert "'prefill_checkpoint' is only for mamba groups, not full" in str(caught.value)


def test_a_negative_retention_interval_is_refused_at_its_line(write_case: WriteCase) -> None:
    text = replaced(
        HYBRID, ("prefix_cache_retention_interval: 0", "prefix_cache_retention_interval: -4")
    )
    with pytest.raises(CaseFileError) as caught:
        load_case_file(write_case(text))
    assert caught.value.line == 5
    assert "prefix_cache_retention_interval" in str(caught.value)


def _scheduler(adapter: Any, write_case: WriteCase, text: str) -> Any:
    case = load_case_file(write_case(text))[1]
    assert adapter.unsupported(case) is None
    return adapter.build(case, 24).scheduler


@needs_vllm
def test_a_checkpointing_mamba_group_has_its_checkpoint_block(
    adapter: Any, write_case: WriteCase
) -> None:
    """vLLM's MambaMixer2 spec: one prefill checkpoint block on a one-token grid."""
    manager = _scheduler(adapter, write_case, HYBRID).kv_cache_manager.coordinator
    spec = manager.single_type_managers[1].kv_cache_spec
    assert (spec.num_prefill_checkpoint_blocks, spec.prefill_checkpoint_alignment) == (1, 1)
    assert manager.single_type_managers[1].has_prefill_checkpoint_blocks
    plain = replaced(HYBRID, (", prefill_checkpoint: true", ""))
    spec = _scheduler(adapter, write_case, plain).kv_cache_manager.coordinator
    assert spec.single_type_managers[1].kv_cache_spec.num_prefill_checkpoint_blocks == 0


@needs_vllm
@pytest.mark.parametrize(("written", "interval"), [("0", 0), ("8", 8), ("dense", None)])
def test_the_retention_interval_reaches_the_cache_config_and_the_coordinator(
    adapter: Any, write_case: WriteCase, written: str, interval: int | None
) -> None:
    text = replaced(
        HYBRID,
        ("prefix_cache_retention_interval: 0", f"prefix_cache_retention_interval: {written}"),
    )
    scheduler = _scheduler(adapter, write_case, text)
    assert scheduler.cache_config.prefix_cache_retention_interval == interval
    assert scheduler.kv_cache_config.prefix_cache_retention_interval == interval
    assert scheduler.kv_cache_manager.coordinator.retention_interval == interval


@needs_vllm
def test_unset_the_retention_interval_is_the_kv_cache_configs_own_default(
    adapter: Any, write_case: WriteCase
) -> None:
    from vllm.v1.kv_cache_interface import KVCacheConfig

    text = replaced(HYBRID, ("engine: {prefix_cache_retention_interval: 0}\n", ""))
    scheduler = _scheduler(adapter, write_case, text)
    default = KVCacheConfig.__dataclass_fields__["prefix_cache_retention_interval"].default
    assert scheduler.kv_cache_manager.coordinator.retention_interval == default


@needs_vllm
def test_vllm_judges_the_retention_interval(adapter: Any, write_case: WriteCase) -> None:
    """A positive interval must be a multiple of the scheduler's block (vLLM's own check)."""
    from matrix.run.pools import run_pool

    text = replaced(
        HYBRID, ("prefix_cache_retention_interval: 0", "prefix_cache_retention_interval: 6")
    )
    trace = run_pool(adapter, load_case_file(write_case(text))[1], "stock", 24)
    assert trace.stopped == "error"
    assert "prefix_cache_retention_interval (6)" in trace.message
