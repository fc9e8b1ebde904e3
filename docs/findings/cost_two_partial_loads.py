# SPDX-License-Identifier: Apache-2.0
"""What finding 3's fix costs where loads cover part of the prompt (docs/findings.md, finding 3,
"Cost"), by hand in vLLM's tree: two requests of 10 blocks (152 prompt tokens and 8 output
tokens, 16-token blocks), each with an async hit of 2 blocks through vLLM's MockKVConnector, no
speculative decoding, each load reported done in the output of the step that starts it (the
matrix's own run, cost_two_partial_loads.yaml beside this file, has loads landing 1, 2 or 3
steps after admission). Per pool: the steps to finish both, the step each load was admitted at,
the preemptions. Run from a vLLM source tree's root (its tests/ helpers), on the release or with
3-async-load-admission.patch applied:

    VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 python .../cost_two_partial_loads.py 12 21
"""

import sys

from tests.v1.kv_connector.unit.utils import (
    create_model_runner_output,
    create_request,
    create_scheduler,
    create_vllm_config,
)
from vllm.v1.request import RequestStatus

BLOCK_SIZE = 16


def run(num_blocks: int) -> tuple[int | None, dict[str, int], int]:
    config = create_vllm_config(
        block_size=BLOCK_SIZE,
        kv_connector="MockKVConnector",
        kv_connector_extra_config={"matched_tokens": 2 * BLOCK_SIZE, "is_async": True},
    )
    scheduler = create_scheduler(config, num_blocks=num_blocks)
    requests = [
        create_request(
            request_id=i, block_size=BLOCK_SIZE, num_tokens=10 * BLOCK_SIZE - 8, max_tokens=8
        )
        for i in (1, 2)
    ]
    for request in requests:
        scheduler.add_request(request)
    admitted: dict[str, int] = {}
    for step in range(1, 200):
        output = scheduler.schedule()
        loading = set()
        for request in requests:
            if request.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
                admitted.setdefault(request.request_id, step)
                loading.add(request.request_id)
        running = [r for r in requests if r.request_id in output.num_scheduled_tokens]
        scheduler.update_from_output(
            output, create_model_runner_output(running, finished_recving=loading or None)
        )
        if all(r.is_finished() for r in requests):
            return step, admitted, sum(r.num_preemptions for r in requests)
    return None, admitted, sum(r.num_preemptions for r in requests)


if __name__ == "__main__":
    for pool in range(int(sys.argv[1]), int(sys.argv[2]) + 1):
        steps, admitted, preemptions = run(pool)
        print(f"{pool} blocks: {steps} steps, loads admitted at steps {admitted}, "
              f"{preemptions} preemptions")
