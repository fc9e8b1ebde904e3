# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""An async load must not wait for ever in a pool an engine serving it starts with.

The admission keeps ceil(N / block_size) blocks free per non-Mamba group for the first
speculative step (N = 1 + num_spec_tokens + num_lookahead_tokens), whatever room the
prompt's last block has left. A conservative bound, but with a prompt one token past a
block boundary it is one block more per attention group than the step needs: at the
smallest pool vLLM's start-up sizing gives an engine serving the request, the request is
refused at every step, with nothing running that could ever free a block.
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
# Two groups (full + sliding window 128). The request's 33 prompt + 4 output tokens
# and one ngram draft stay within 3 blocks per group: 6 blocks and the null block.
# get_kv_cache_configs starts an engine with max_model_len 38 on these groups with
# 8 blocks.
STARTABLE = 8
MAX_STEPS = 16


def _scheduler(num_blocks):
    vllm_config = create_vllm_config(
        block_size=BLOCK_SIZE,
        num_speculative_tokens=1,
        disable_hybrid_kv_cache_manager=False,
    )
    kv_cache_config = make_kv_cache_config(
        BLOCK_SIZE, swa_enabled=True, sw_size=128, num_blocks=num_blocks
    )
    return create_scheduler(
        vllm_config, num_blocks=num_blocks, kv_cache_config=kv_cache_config
    )


def _run(scheduler, request):
    """Engine steps until the request finishes, reporting its load done once started;
    returns the statuses it went through."""
    statuses = []
    for _ in range(MAX_STEPS):
        scheduler_output = scheduler.schedule()
        statuses.append(request.status)
        if request.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
            output = create_model_runner_output(
                [], finished_recving={request.request_id}
            )
        elif request.status == RequestStatus.RUNNING:
            output = create_model_runner_output([request])
        else:
            output = create_model_runner_output([])
        scheduler.update_from_output(scheduler_output, output)
        if request.is_finished():
            break
    return statuses


@pytest.mark.parametrize("num_blocks", [STARTABLE, STARTABLE + 1])
@pytest.mark.parametrize("remote", [False, True], ids=["local", "async-load"])
def test_request_finishes_in_a_pool_the_engine_starts_with(remote, num_blocks):
    scheduler = _scheduler(num_blocks)
    request = create_request(
        request_id=1,
        block_size=BLOCK_SIZE,
        num_tokens=2 * BLOCK_SIZE + 1,
        do_remote_prefill=remote,
        max_tokens=4,
    )
    scheduler.add_request(request)
    statuses = _run(scheduler, request)
    assert request.is_finished(), (
        f"{statuses.count(RequestStatus.WAITING)} of {MAX_STEPS} steps refused with "
        f"nothing running and "
        f"{scheduler.kv_cache_manager.block_pool.get_num_free_blocks()} of "
        f"{num_blocks - 1} blocks free"
    )
    # An async load is admitted at once, then promoted.
    expected_first = (
        RequestStatus.WAITING_FOR_REMOTE_KVS if remote else RequestStatus.RUNNING
    )
    assert statuses[0] == expected_first
