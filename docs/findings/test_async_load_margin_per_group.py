# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
# upstream folder: tests/v1/kv_connector/unit
"""An async load that fits the pool alone must be admitted.

The admission margin for the first speculative step is ceil(N / block_size)
per non-Mamba group (N = 1 + num_spec_tokens + num_lookahead_tokens),
whatever room the prompt's last block has left. A prompt one token past a
block boundary needs no new block for that step, yet is refused in a pool of
exactly its size: one block short per attention group.
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
# Two groups (full + sliding window 128); 33 prompt + 4 output tokens and one
# ngram draft stay within 3 blocks per group: 6 blocks + the null block.
FIT = 7


@pytest.mark.parametrize("num_blocks", [FIT, FIT + 1])
@pytest.mark.parametrize("remote", [False, True], ids=["local", "async-load"])
def test_request_that_fits_alone_is_admitted(remote, num_blocks):
    vllm_config = create_vllm_config(
        block_size=BLOCK_SIZE,
        num_speculative_tokens=1,
        disable_hybrid_kv_cache_manager=False,
    )
    kv_cache_config = make_kv_cache_config(
        BLOCK_SIZE, swa_enabled=True, sw_size=128, num_blocks=num_blocks
    )
    scheduler = create_scheduler(
        vllm_config, num_blocks=num_blocks, kv_cache_config=kv_cache_config
    )
    request = create_request(
        request_id=1,
        block_size=BLOCK_SIZE,
        num_tokens=2 * BLOCK_SIZE + 1,
        do_remote_prefill=remote,
        max_tokens=4,
    )
    scheduler.add_request(request)

    scheduler_output = scheduler.schedule()
    if remote:
        assert request.status == RequestStatus.WAITING_FOR_REMOTE_KVS, (
            f"async load refused at {num_blocks} blocks, which it fits alone"
        )
        scheduler.update_from_output(
            scheduler_output,
            create_model_runner_output([], finished_recving={request.request_id}),
        )
        scheduler_output = scheduler.schedule()
    for _ in range(10):
        assert request.status == RequestStatus.RUNNING
        scheduler.update_from_output(
            scheduler_output, create_model_runner_output([request])
        )
        if request.is_finished():
            break
        scheduler_output = scheduler.schedule()
    assert request.is_finished()
