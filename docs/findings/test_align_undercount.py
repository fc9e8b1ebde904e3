# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""An align-mode hybrid async load must not be admitted unless it can be promoted.

NIXL loads prompt - 1 tokens for a model with Mamba layers (the decoder recomputes the
last token). With a prompt one token past a block boundary the load ends on a block
boundary: the loaded Mamba state sits in the last loaded block and stays the copy source
while the first scheduled token's state goes into a new block, so promotion needs two
Mamba blocks. The admitting request's full-sequence check counts one (the admission cap
of a request that holds no block yet); the reservation of the load once in flight counts
both.
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
# 65 prompt tokens: 5 attention blocks and 2 Mamba state blocks at promotion, plus
# the null block. The load brings 64 tokens: 4 attention blocks and 1 Mamba block.
NUM_TOKENS = 4 * BLOCK_SIZE + 1
FIT = 8


def _scheduler(num_blocks):
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
    return create_scheduler(
        vllm_config, num_blocks=num_blocks, kv_cache_config=kv_cache_config
    )


def _remote_prefill(scheduler):
    request = create_request(
        request_id=1,
        block_size=BLOCK_SIZE,
        num_tokens=NUM_TOKENS,
        do_remote_prefill=True,
        max_tokens=2,
    )
    scheduler.add_request(request)
    # The real NixlConnector scheduler side decides what is loaded: 64 tokens.
    scheduler.update_from_output(scheduler.schedule(), create_model_runner_output([]))
    return request


def test_align_async_load_that_cannot_be_promoted_is_not_admitted():
    """One block short of the fit: promotion could never find its second Mamba block,
    so the load must wait instead of taking 5 blocks it can never use."""
    scheduler = _scheduler(FIT - 1)
    request = _remote_prefill(scheduler)
    assert request.status == RequestStatus.WAITING, (
        f"admitted as an async load at {FIT - 1} blocks, which its promotion "
        f"needs {FIT} of: it will hold {request.num_computed_tokens} loaded tokens "
        "and never be scheduled"
    )
    assert scheduler.kv_cache_manager.block_pool.get_num_free_blocks() == FIT - 2


@pytest.mark.parametrize("num_blocks", [FIT, FIT + 1])
def test_align_async_load_that_fits_is_admitted_and_promoted(num_blocks):
    scheduler = _scheduler(num_blocks)
    request = _remote_prefill(scheduler)
    assert request.status == RequestStatus.WAITING_FOR_REMOTE_KVS
    assert request.num_computed_tokens == NUM_TOKENS - 1
    # In flight, the load keeps what promotion still needs: the 5th attention block
    # and the second Mamba state block.
    assert scheduler._inflight_prefill_reserved_blocks() == 2

    # The load lands; nothing else is running.
    scheduler.update_from_output(
        scheduler.schedule(),
        create_model_runner_output([], finished_recving={request.request_id}),
    )
    scheduler_output = scheduler.schedule()
    assert request.status == RequestStatus.RUNNING
    assert scheduler_output.num_scheduled_tokens[request.request_id] == 1
