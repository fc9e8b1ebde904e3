# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""A partial async load must not be admitted unless it can be promoted.

A store or offload connector (MooncakeStore, Offloading, SimpleCPUOffload) loads what
its tier holds: part of the prompt. The async-load admission keeps the speculative
step's margin free on top of the loaded tokens' blocks, and the full-sequence check
counts the prompt without the drafter's lookahead. The step after a partial load is a
prefill chunk, the rest of the prompt plus the lookahead slots, which can need a block
more than either check left. With nothing else running the loaded request is never
scheduled. A load of all but the last token (NIXL's) is refused in the same pool.
"""

import pytest

from vllm.v1.request import RequestStatus

from .utils import (
    create_model_runner_output,
    create_request,
    create_scheduler,
    create_vllm_config,
)

pytestmark = pytest.mark.cpu_test

BLOCK_SIZE = 4
NUM_TOKENS = 4 * BLOCK_SIZE
# What the tier holds: 3 of the prompt's 4 blocks.
PARTIAL = 3 * BLOCK_SIZE
WHOLE = NUM_TOKENS - 1
# EAGLE k=1: the margin is ceil((1 + 1 + 1 lookahead) / 4) = 1 block. Promotion of
# either load schedules up to the prompt's end plus 1 lookahead slot: 17 tokens, 5
# blocks, which 6 blocks (5 and the null block) hold.
PROMOTABLE = 6


def _scheduler(num_blocks, matched_tokens):
    """One full-attention group; the connector matches ``matched_tokens`` of a request
    asynchronously, as a store connector answers for what its tier holds."""
    vllm_config = create_vllm_config(
        block_size=BLOCK_SIZE,
        max_model_len=128,
        num_speculative_tokens=1,
        kv_connector="MockKVConnector",
        kv_connector_extra_config={"matched_tokens": matched_tokens, "is_async": True},
        disable_hybrid_kv_cache_manager=True,
    )
    # An EAGLE drafter (it needs a draft model to build, the scheduler only reads
    # the method): the lookahead slots a prefill chunk allocates.
    object.__setattr__(vllm_config.speculative_config, "method", "eagle")
    assert vllm_config.num_lookahead_tokens == 1
    return create_scheduler(vllm_config, num_blocks=num_blocks)


def _admit(scheduler):
    request = create_request(
        request_id=1, block_size=BLOCK_SIZE, num_tokens=NUM_TOKENS, max_tokens=2
    )
    scheduler.add_request(request)
    scheduler.update_from_output(scheduler.schedule(), create_model_runner_output([]))
    return request


def _steps_after_load(scheduler, request, steps=8):
    """Reports the load done, then counts the steps the request is scheduled in."""
    scheduler.update_from_output(
        scheduler.schedule(),
        create_model_runner_output([], finished_recving={request.request_id}),
    )
    scheduled = 0
    for _ in range(steps):
        scheduler_output = scheduler.schedule()
        running = request.request_id in scheduler_output.num_scheduled_tokens
        scheduled += running
        output = create_model_runner_output([request] if running else [])
        scheduler.update_from_output(scheduler_output, output)
        if request.is_finished():
            break
    return scheduled


@pytest.mark.parametrize("matched_tokens", [PARTIAL, WHOLE], ids=["partial", "whole"])
def test_async_load_that_cannot_be_promoted_is_not_admitted(matched_tokens):
    """One block short of promotion: the load must wait instead of taking blocks its
    request can never use."""
    scheduler = _scheduler(PROMOTABLE - 1, matched_tokens)
    request = _admit(scheduler)
    status = request.status
    if status != RequestStatus.WAITING:
        scheduled = _steps_after_load(scheduler, request)
        free = scheduler.kv_cache_manager.block_pool.get_num_free_blocks()
        pytest.fail(
            f"admitted as an async load of {matched_tokens} of {NUM_TOKENS} tokens at "
            f"{PROMOTABLE - 1} blocks, whose promotion needs {PROMOTABLE}: once loaded "
            f"it was scheduled in {scheduled} of 8 steps, nothing else running, "
            f"{free} block(s) free"
        )
    assert scheduler.kv_cache_manager.block_pool.get_num_free_blocks() == PROMOTABLE - 2


@pytest.mark.parametrize("num_blocks", [PROMOTABLE, PROMOTABLE + 1])
@pytest.mark.parametrize("matched_tokens", [PARTIAL, WHOLE], ids=["partial", "whole"])
def test_async_load_that_fits_is_admitted_and_promoted(matched_tokens, num_blocks):
    scheduler = _scheduler(num_blocks, matched_tokens)
    request = _admit(scheduler)
    assert request.status == RequestStatus.WAITING_FOR_REMOTE_KVS
    assert request.num_computed_tokens == matched_tokens

    # The load lands; nothing else is running: the rest of the prompt is scheduled
    # (the last one padded with the speculative step's slot).
    scheduler.update_from_output(
        scheduler.schedule(),
        create_model_runner_output([], finished_recving={request.request_id}),
    )
    scheduler_output = scheduler.schedule()
    assert request.status == RequestStatus.RUNNING
    scheduled = scheduler_output.num_scheduled_tokens[request.request_id]
    assert scheduled >= NUM_TOKENS - matched_tokens
