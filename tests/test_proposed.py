"""The candidate ``proposed`` against vLLM's real scheduler: exact at an unaligned prompt, the
second Mamba ``align`` state block reserved, and installed on one instance only."""

from __future__ import annotations

from typing import Any

import pytest

from matrix.case.loading import load_case_file
from matrix.judge.runs import classify_run
from matrix.run.fit import measure_fit
from matrix.run.pools import run_pool
from matrix.run.variants import VARIANTS
from tests.helpers import WriteCase, needs_vllm

pytestmark = needs_vllm

# Block 16, prompt 33: one token past a boundary. The first speculative step (33 + N tokens,
# N = 3 with k = 1 and 7 with k = 3) fits in the prompt's last block, so the fit is the
# prompt's 3 blocks and the null block; `fixed` still keeps ceil(N / 16) = 1 block free.
UNALIGNED = """\
name: unaligned
groups:
  - {{kind: full, block_size: 16}}
speculative: {{method: eagle, num_tokens: {k}}}
pool: 8
requests:
  - {{id: a, prompt: 33, max_tokens: 4}}
"""

# Mamba align (block 4) beside full attention. NIXL loads the prompt but its last token for a
# model with Mamba layers: prompt 17 loads 16 tokens, a load ending on a block boundary, whose
# promotion takes a second state block while the loaded one is still the copy source.
MAMBA_ALIGN = """\
name: align_past
groups:
  - {{kind: full, block_size: 4}}
  - {{kind: mamba, block_size: 4, mamba_mode: align}}
{speculative}pool: 16
requests:
  - {{id: a, prompt: {prompt}, max_tokens: 4}}
"""


def case_of(write_case: WriteCase, text: str) -> Any:
    return load_case_file(write_case(text))[1]


def kind_at(adapter: Any, case: Any, variant: str, pool: int) -> str:
    return classify_run(run_pool(adapter, case, variant, pool)).kind


@pytest.mark.parametrize("k", [1, 3])
def test_unaligned_prompt_fixed_refuses_at_the_fit_proposed_finishes(
    adapter: Any, write_case: WriteCase, k: int
) -> None:
    case = case_of(write_case, UNALIGNED.format(k=k))
    fit = measure_fit(adapter, case).blocks
    assert fit == 4  # the null block and the prompt's 3 blocks
    assert kind_at(adapter, case, "fixed", fit) == "not_admitted"
    assert kind_at(adapter, case, "fixed", fit + 1) == "finished"
    assert kind_at(adapter, case, "proposed", fit) == "finished"
    assert kind_at(adapter, case, "proposed", fit - 1) == "not_admitted"


@pytest.mark.parametrize(
    "speculative", ["", "speculative: {method: eagle, num_tokens: 3}\n"], ids=["k0", "eagle3"]
)
def test_mamba_align_one_past_proposed_refuses_where_fixed_stalls(
    adapter: Any, write_case: WriteCase, speculative: str
) -> None:
    case = case_of(write_case, MAMBA_ALIGN.format(speculative=speculative, prompt=17))
    fit = measure_fit(adapter, case).blocks
    # One block below the fit the admission's own count (one state block) still passes.
    assert kind_at(adapter, case, "fixed", fit - 1) == "stall"
    assert kind_at(adapter, case, "proposed", fit - 1) == "not_admitted"
    assert kind_at(adapter, case, "proposed", fit) == "finished"


@pytest.mark.parametrize("prompt", [16, 18])
def test_mamba_align_no_second_state_block_off_the_boundary(
    adapter: Any, write_case: WriteCase, prompt: int
) -> None:
    """Loads of 15 and 17 tokens end inside a block: the promotion's state stays in it, so
    ``proposed`` reserves no extra state block: pool by pool it ends as ``fixed`` does."""
    case = case_of(write_case, MAMBA_ALIGN.format(speculative="", prompt=prompt))
    fit = measure_fit(adapter, case).blocks
    pools = range(fit - 2, fit + 1)
    kinds = {v: [kind_at(adapter, case, v, pool) for pool in pools] for v in ("fixed", "proposed")}
    assert kinds["proposed"] == kinds["fixed"]
    assert kinds["proposed"][-1] == "finished" and "stall" not in kinds["proposed"]


@pytest.mark.parametrize("prompt", [16, 17])
def test_mamba_none_no_state_block_reserved(
    adapter: Any, write_case: WriteCase, prompt: int
) -> None:
    """Mamba ``none`` (one block of max_model_len tokens) gets its state and speculative
    blocks at the admission itself: ``proposed`` keeps nothing for the group, so it finishes
    at the fit where ``all_groups``, which keeps ceil(N / B) for it too, refuses."""
    text = MAMBA_ALIGN.format(
        speculative="speculative: {method: eagle, num_tokens: 3}\n", prompt=prompt
    ).replace("block_size: 4, mamba_mode: align", "block_size: max_model_len, mamba_mode: none")
    case = case_of(write_case, text)
    fit = measure_fit(adapter, case).blocks
    assert kind_at(adapter, case, "all_groups", fit) == "not_admitted"
    assert kind_at(adapter, case, "proposed", fit) == "finished"
    assert kind_at(adapter, case, "proposed", fit - 1) == "not_admitted"


def test_admission_need_is_what_the_load_still_needs_once_admitted(
    adapter: Any, write_case: WriteCase
) -> None:
    """The margin ``proposed`` counts before the allocation is the coordinator's count of the
    admitted load's remaining blocks (full + N tokens) right after it, group by group."""
    window = "  - {kind: sliding_window, block_size: 8, window: 8}\n"
    text = MAMBA_ALIGN.format(
        speculative="speculative: {method: eagle, num_tokens: 3}\n", prompt=17
    ).replace("  - {kind: mamba,", window + "  - {kind: mamba,")
    case = case_of(write_case, text)
    handle = adapter.build(case, 64)
    manager = handle.scheduler.kv_cache_manager
    allocate = manager.allocate_slots
    counted: list[tuple[int, int]] = []

    def allocate_slots(request: Any, *args: Any, **kwargs: Any) -> Any:
        margin = kwargs["reserved_blocks"]  # nothing else in flight: the margin alone
        blocks = allocate(request, *args, **kwargs)
        counted.append((margin, handle.remaining_blocks(request, True)))
        return blocks

    manager.allocate_slots = allocate_slots  # beneath the variant's, which adds the margin
    VARIANTS["proposed"].apply(handle)
    for request in case.requests:
        handle.add_request(request)
    handle.step(set())
    assert len(counted) == 1
    margin, remaining = counted[0]
    assert margin == remaining > 0


def test_proposed_is_installed_on_one_instance_only(adapter: Any, write_case: WriteCase) -> None:
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.sched.scheduler import Scheduler

    scheduler_class = dict(vars(Scheduler))
    manager_class = dict(vars(KVCacheManager))
    case = case_of(write_case, UNALIGNED.format(k=1))
    before = classify_run(run_pool(adapter, case, "fixed", 4))
    patched, other = adapter.build(case, 4), adapter.build(case, 4)
    VARIANTS["proposed"].apply(patched)
    assert "allocate_slots" in vars(patched.scheduler.kv_cache_manager)
    assert "allocate_slots" not in vars(other.scheduler.kv_cache_manager)
    assert "_inflight_prefill_reserved_blocks" not in vars(other.scheduler)
    assert kind_at(adapter, case, "proposed", 4) == "finished"
    after = classify_run(run_pool(adapter, case, "fixed", 4))
    assert after == before and before.kind == "not_admitted"
    assert dict(vars(Scheduler)) == scheduler_class
    assert dict(vars(KVCacheManager)) == manager_class
