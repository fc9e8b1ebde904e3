# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
# upstream folder: tests/v1/kv_connector/unit
"""An align-mode hybrid async load must not be admitted unless it can be promoted.

NIXL loads prompt - 1 tokens for a model with Mamba layers (the decoder recomputes the
last token). With a prompt one token past a block boundary the load ends on a block
boundary: the loaded Mamba state sits in the last loaded block and stays the copy source
while the first scheduled token's state goes into a new block, so promotion needs two
Mamba blocks. The full-sequence admission check counts one.
"""

import pytest

from vllm.v1.request import RequestStatus

from .utils import (
    create_model_runner_output,
    create_request,
    create_scheduler,
    create_vllm_config,
    make_kv_cache_config,
)

pytestmark = pytest.mark.cpu_test

BLOCK_SIZE = 16


@pytest.mark.parametrize("num_blocks", [7, 8, 9])
def test_align_async_load_past_block_boundary_is_promotable(num_blocks):
    """A 65-token prompt needs 5 attention + 2 Mamba blocks (+ the null block) to
    run; at a smaller pool it must wait, not be admitted and then stall."""
    vllm_config = create_vllm_config(
        block_size=BLOCK_SIZE,
        max_model_len=128,
        disable_hybrid_kv_cache_manager=False,
    )
    vllm_config.cache_config.mamba_cache_mode = "align"
    vllm_config.cache_config.enable_prefix_caching = True
    kv_cache_config = make_kv_cache_config(
        BLOCK_SIZE,
        mamba_enabled=True,
        mamba_cache_mode="align",
        num_blocks=num_blocks,
    )
    scheduler = create_scheduler(
        vllm_config, num_blocks=num_blocks, kv_cache_config=kv_cache_config
    )
    request = create_request(
        request_id=1,
        block_size=BLOCK_SIZE,
        num_tokens=4 * BLOCK_SIZE + 1,
        do_remote_prefill=True,
        max_tokens=2,
    )
    scheduler.add_request(request)

    # The real NixlConnector scheduler side decides what is loaded: 64 tokens.
    scheduler.update_from_output(scheduler.schedule(), create_model_runner_output([]))
    if request.status != RequestStatus.WAITING_FOR_REMOTE_KVS:
        # Not admitted: acceptable in a pool the request does not fit.
        assert num_blocks < 8
        return
    assert request.num_computed_tokens == 4 * BLOCK_SIZE

    # The load lands; nothing else is running, so nothing will ever free a block.
    scheduler.update_from_output(
        scheduler.schedule(),
        create_model_runner_output([], finished_recving={request.request_id}),
    )
    scheduler_output = scheduler.schedule()
    assert request.status == RequestStatus.RUNNING, (
        f"admitted as an async load at {num_blocks} blocks, loaded, then never "
        f"scheduled: {scheduler.kv_cache_manager.block_pool.get_num_free_blocks()} "
        "blocks free and nothing running"
    )
    assert scheduler_output.num_scheduled_tokens[request.request_id] == 1
