"""Where every block of a scheduler's pool is, read from vLLM's own block pool and managers
(and, for a picture, each group's blocks per request).

A block is free (in the pool's free queue, cached or not), held (in some request's block
table, in any KV cache group, waiting in the scheduler's deferred frees, or referenced by the
connector: a load or store in flight), or the null block. Nothing else may keep one: a block
in none of these places has leaked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from matrix.adapters.protocol import BlockAccount

_block_id = attrgetter("block_id")


def block_account(scheduler: Any, pinned: frozenset[int] = frozenset()) -> BlockAccount:
    """Where every block of ``scheduler``'s pool is: free, held (each block once: in a block
    table, a deferred free, or ``pinned`` by the connector), and, when the count needs
    explaining (it does not balance, or blocks are held once no request is left), by whom."""
    manager = scheduler.kv_cache_manager
    groups = manager.coordinator.single_type_managers
    pool = manager.block_pool
    # Block ids: a prefix block shared by two requests counts once.
    held: set[int] = set()
    for group in groups:
        for blocks in group.req_to_blocks.values():
            held.update(map(_block_id, blocks))
    for _, blocks in scheduler.deferred_frees:
        held.update(map(_block_id, blocks))
    held |= pinned
    # The null block (the pool's one block with ``is_null``) stands in the tables for blocks a
    # group skips; it is never held.
    held.discard(pool.null_block.block_id)
    free = pool.get_num_free_blocks()
    holders: tuple[str, ...] = ()
    balanced = free + len(held) + 1 == pool.num_gpu_blocks
    # Balanced with every block free, no request holds one: nothing to name.
    if not balanced or (not scheduler.requests and free + 1 != pool.num_gpu_blocks):
        holders = tuple(
            sorted(
                {
                    request_id
                    for group in groups
                    for request_id, blocks in group.req_to_blocks.items()
                    if any(not block.is_null for block in blocks)
                }
            )
        ) + (("the connector",) if pinned else ())
    return BlockAccount(pool.num_gpu_blocks, free, len(held), holders)


def blocks_by_group(scheduler: Any, request_ids: Sequence[str]) -> tuple[tuple[int, ...], ...]:
    """Each KV cache group's blocks (but the null block) per request, in ``request_ids``'
    order; a request not holding any has 0."""
    return tuple(
        tuple(
            sum(not block.is_null for block in group.req_to_blocks.get(request_id, ()))
            for request_id in request_ids
        )
        for group in scheduler.kv_cache_manager.coordinator.single_type_managers
    )


def group_labels(scheduler: Any) -> tuple[str, ...]:
    """Each KV cache group in words, from vLLM's spec: ``full attention, 16-token blocks``,
    ``sliding window 4096, 16-token blocks``, ``mamba (align), 64-token blocks``."""
    labels = []
    for group in scheduler.kv_cache_manager.coordinator.single_type_managers:
        spec = group.kv_cache_spec
        name = re.sub(r"Spec$", "", type(spec).__name__)
        words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name).lower()
        detail = getattr(spec, "sliding_window", None) or getattr(
            spec, "attention_chunk_size", None
        )
        mode = getattr(spec, "mamba_cache_mode", None)
        words += f" {detail}" if detail else f" ({mode})" if mode else ""
        labels.append(f"{words}, {group.block_size}-token blocks")
    return tuple(labels)
