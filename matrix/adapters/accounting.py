"""Where every block of a scheduler's pool is, read from vLLM's own block pool and managers.

A block is free (in the pool's free queue, cached or not), held (in some request's block
table, in any KV cache group, or waiting in the scheduler's deferred frees), or the null
block. Nothing else may keep one: a block in none of these places has leaked.
"""

from __future__ import annotations

from typing import Any

from matrix.adapters.protocol import BlockAccount


def block_account(scheduler: Any) -> BlockAccount:
    """Where every block of ``scheduler``'s pool is: free, held (each block once), and by whom."""
    manager = scheduler.kv_cache_manager
    held: set[int] = set()  # block ids: a prefix block shared by two requests counts once
    holders: set[str] = set()
    for group in manager.coordinator.single_type_managers:
        for request_id, blocks in group.req_to_blocks.items():
            ids = {block.block_id for block in blocks if not block.is_null}
            if ids:
                holders.add(request_id)
                held |= ids
    for _, blocks in scheduler.deferred_frees:
        held |= {block.block_id for block in blocks if not block.is_null}
    pool = manager.block_pool
    return BlockAccount(
        pool=pool.num_gpu_blocks,
        free=pool.get_num_free_blocks(),
        held=len(held),
        holders=tuple(sorted(holders)),
    )
