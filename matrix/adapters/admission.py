"""What an async-load admission's own request needs beyond its load, counted group by group by
vLLM's KV cache managers: the admission margin of ``proposed`` (see
``Handle.install_reservation(admission_need_per_group=True)``).

At admission the scheduler allocates the blocks for the tokens the load brings (the local
prefix hit plus the connector's tokens; NIXL stops one token short of the prompt when the model
has Mamba layers) and hands ``allocate_slots`` the reservation of the other loads. What the
request itself will still need is:

- in each non-Mamba group, the blocks its first speculative step (all its tokens + N) needs
  beyond those of the load: the manager's own count for both token counts, so the room left in
  the load's last block, sliding windows and admission caps are the manager's;
- in a Mamba group, nothing in ``none`` mode (the admission allocates its state and speculative
  blocks at once) and, in ``align`` mode, one state block when the promotion step's state lands
  in a block the load did not allocate (``cdiv(tokens, B) > cdiv(loaded, B)``; with NIXL's
  prompt - 1 tokens, a load ending on a block boundary): ``MambaManager.allocate_new_blocks``
  then takes a new block while the loaded state's block stays, the source its state is copied
  from, until ``remove_skipped_blocks`` frees it a step later. The admission's own counts (the
  full-sequence check under the admission cap) see one state block per group.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from vllm.utils.math_utils import cdiv
from vllm.v1.core.single_type_kv_cache_manager import CrossAttentionManager
from vllm.v1.kv_cache_interface import MambaSpec


def loaded_tokens(scheduler: Any, request: Any, allocation: Mapping[str, Any]) -> int:
    """The tokens an async-load admission allocates for: computed, local prefix hit and the
    connector's tokens (``allocate_slots``'s ``total_computed_tokens``)."""
    tokens = (
        request.num_computed_tokens
        + allocation.get("num_new_computed_tokens", 0)
        + allocation.get("num_external_computed_tokens", 0)
    )
    return min(int(tokens), int(scheduler.max_model_len))


def admission_need(
    scheduler: Any, request: Any, allocation: Mapping[str, Any], options: Mapping[str, Any]
) -> int:
    """Blocks ``request``, being admitted for an async load with ``allocation`` (the keyword
    arguments of its ``allocate_slots`` call), still needs after the load for its first
    speculative step; ``options`` are the release's extra arguments of the managers'
    ``get_num_blocks_to_allocate``."""
    coordinator = scheduler.kv_cache_manager.coordinator
    loaded = loaded_tokens(scheduler, request, allocation)
    full = min(request.num_tokens, scheduler.max_model_len)
    step = full
    if scheduler.num_spec_tokens:
        step += 1 + scheduler.num_spec_tokens + scheduler.num_lookahead_tokens
    local = request.num_computed_tokens + allocation.get("num_new_computed_tokens", 0)
    hits = allocation.get("new_computed_blocks")
    hit_blocks = hits.blocks if hits is not None else None
    need = 0
    for index, manager in enumerate(coordinator.single_type_managers):
        if isinstance(manager, CrossAttentionManager):
            continue  # sized by encoder tokens, once, whatever the decoder's count
        if isinstance(manager.kv_cache_spec, MambaSpec):
            need += mamba_promotion_block(manager, full, loaded)
            continue
        hit = hit_blocks[index] if hit_blocks is not None else []
        count = partial(
            manager.get_num_blocks_to_allocate,
            request.request_id,
            new_computed_blocks=hit,
            total_computed_tokens=loaded,
            num_local_computed_tokens=local,
            apply_admission_cap=True,
            **options,
        )
        # Both counts start from the same hit and the same window, so their difference is
        # what the step adds to the load's blocks in this group.
        step_blocks: int = count(num_tokens=step, num_tokens_main_model=full)
        load_blocks: int = count(num_tokens=loaded, num_tokens_main_model=loaded)
        need += max(step_blocks - load_blocks, 0)
    return need


def mamba_promotion_block(manager: Any, tokens: int, loaded: int) -> int:
    """1 when an ``align`` Mamba group's promotion step opens a state block the load did not
    allocate (the loaded state's block is then still held as the copy source), else 0."""
    if manager.kv_cache_spec.mamba_cache_mode != "align" or not 0 < loaded < tokens:
        return 0
    return int(cdiv(tokens, manager.block_size) > cdiv(loaded, manager.block_size))
