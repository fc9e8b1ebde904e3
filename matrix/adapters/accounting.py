"""Where every block of a scheduler's pool is, read from vLLM's own block pool and managers.

A block is free (in the pool's free queue, cached or not), held (in some request's block
table, in any KV cache group, or waiting in the scheduler's deferred frees), or the null
block. Nothing else may keep one: a block in none of these places has leaked.
"""

from __future__ import annotations

from typing import Any

from matrix.adapters.protocol import BlockAccount


def block_account(scheduler: Any) -> BlockAccount:
    """Where every block of ``scheduler``'s pool is: free, held (each block once), and, when
    the count needs explaining (it does not balance, or no request is left), by whom."""
    manager = scheduler.kv_cache_manager
    groups = manager.coordinator.single_type_managers
    # Block ids: a prefix block shared by two requests counts once.
    held = {
        block.block_id
        for group in groups
        for blocks in group.req_to_blocks.values()
        for block in blocks
        if not block.is_null
    }
    for _, blocks in scheduler.deferred_frees:
        held |= {block.block_id for block in blocks if not block.is_null}
    pool = manager.block_pool
    free = pool.get_num_free_blocks()
    holders: tuple[str, ...] = ()
    if free + len(held) + 1 != pool.num_gpu_blocks or not scheduler.requests:
        holders = tuple(
            sorted(
                {
                    request_id
                    for group in groups
                    for request_id, blocks in group.req_to_blocks.items()
                    if any(not block.is_null for block in blocks)
                }
            )
        )
    return BlockAccount(pool=pool.num_gpu_blocks, free=free, held=len(held), holders=holders)
