# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""A failed NIXL load on a layout of several full-attention KV cache groups.

NixlConnectorWorker reports a failed load at block level (invalid_block_ids,
the request's first group's blocks) unless `_is_hma_required`, which is true
only when some layer is not a FullAttentionSpec. vLLM groups full-attention
layers of different block sizes (MLA at 64 beside a 16-token draft, say) into
several groups that are all FullAttentionSpec. The scheduler's
`_handle_invalid_blocks` refuses block-level failures whenever there is more
than one group, with a RuntimeError that takes the engine down.
"""

from concurrent.futures import Future
from unittest.mock import MagicMock, patch

import pytest
import torch

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
from vllm.distributed.kv_transfer.kv_connector.v1.nixl import NixlConnector
from vllm.forward_context import ForwardContext
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
)
from vllm.v1.outputs import KVConnectorOutput
from vllm.v1.request import RequestStatus
from vllm.v1.structured_output import StructuredOutputManager

from .utils import (
    create_model_runner_output,
    create_request,
    create_vllm_config,
)

pytestmark = pytest.mark.cpu_test

BLOCK_SIZE = 16
NUM_BLOCKS = 100


def two_full_attention_groups(num_blocks: int) -> KVCacheConfig:
    """What get_kv_cache_groups gives full-attention layers of 16 and 32 tokens
    per block with equal page sizes: two groups, both FullAttentionSpec."""
    return KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[
            KVCacheGroupSpec(
                ["layer0"],
                FullAttentionSpec(
                    block_size=BLOCK_SIZE,
                    num_kv_heads=4,
                    head_size=16,
                    dtype=torch.float16,
                ),
            ),
            KVCacheGroupSpec(
                ["layer1"],
                FullAttentionSpec(
                    block_size=2 * BLOCK_SIZE,
                    num_kv_heads=2,
                    head_size=16,
                    dtype=torch.float16,
                ),
            ),
        ],
    )


@pytest.mark.parametrize(
    ("policy", "status"),
    [
        # The request is prefilled locally instead.
        ("recompute", RequestStatus.RUNNING),
        # The request is finished with an error; the engine goes on.
        ("fail", RequestStatus.FINISHED_ERROR),
    ],
)
@patch(
    "vllm.distributed.kv_transfer.kv_connector.v1.nixl.base_worker.NixlWrapper",
    MagicMock(),
)
def test_failed_load_with_two_full_attention_groups(
    default_vllm_config, dist_init, policy, status
):
    vllm_config = create_vllm_config(
        block_size=2 * BLOCK_SIZE,
        kv_load_failure_policy=policy,
        disable_hybrid_kv_cache_manager=False,
    )
    kv_cache_config = two_full_attention_groups(NUM_BLOCKS)
    vllm_config.cache_config.num_gpu_blocks = NUM_BLOCKS
    # As the engine sizes them (resolve_kv_cache_block_sizes): the scheduler's
    # block is the groups' LCM, the hash block their GCD. From 0.32,
    # create_scheduler(..., hash_block_size=BLOCK_SIZE) does the same.
    scheduler = Scheduler(
        vllm_config=vllm_config,
        kv_cache_config=kv_cache_config,
        log_stats=True,
        structured_output_manager=StructuredOutputManager(vllm_config),
        block_size=2 * BLOCK_SIZE,
        hash_block_size=BLOCK_SIZE,
    )
    assert len(scheduler.kv_cache_config.kv_cache_groups) == 2

    # The decode instance admits a remote prefill as an async load.
    request = create_request(
        request_id=1,
        block_size=BLOCK_SIZE,
        num_tokens=8 * BLOCK_SIZE,
        do_remote_prefill=True,
    )
    # The prefill instance returns its block ids per group.
    assert request.kv_transfer_params is not None
    request.kv_transfer_params["remote_block_ids"] = [list(range(8)), list(range(4))]
    scheduler.add_request(request)
    scheduler_output = scheduler.schedule()
    assert request.status == RequestStatus.WAITING_FOR_REMOTE_KVS

    # The worker side receives the scheduler's metadata; the handshake with the
    # prefill instance has failed, so the load fails.
    worker = NixlConnector(vllm_config, KVConnectorRole.WORKER, kv_cache_config)
    assert not worker.connector_worker._is_hma_required
    # register_kv_caches (which builds the transfer topology) needs device
    # caches; the failed handshake below never reads the topology.
    worker.connector_worker.transfer_topo = MagicMock()
    handshake: Future = Future()
    handshake.set_exception(RuntimeError("prefill instance unreachable"))
    with patch.object(
        worker.connector_worker, "_ensure_handshake", return_value=handshake
    ):
        worker.bind_connector_metadata(scheduler_output.kv_connector_metadata)
        worker.start_load_kv(
            ForwardContext(no_compile_layers={}, attn_metadata={}, slot_mapping={})
        )
    results = worker.get_transfer_results(set())
    assert results.finished_recving == {request.request_id}
    assert results.failed_recving == {request.request_id}
    # And the request's blocks, where the worker reports the failure per block.
    invalid_block_ids = worker.get_block_ids_with_load_errors()

    # What the model runner hands the scheduler (KVConnectorModelRunnerMixin).
    output = create_model_runner_output([])
    output.kv_connector_output = KVConnectorOutput(
        finished_recving=results.finished_recving,
        failed_recving=results.failed_recving,
        invalid_block_ids=invalid_block_ids,
    )
    # The policy runs; the engine does not raise.
    scheduler.update_from_output(scheduler.schedule(), output)
    scheduler.schedule()
    assert request.status == status
