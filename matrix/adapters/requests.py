"""What an engine hands the scheduler for a case's request, and how the verdict names a
request's state: the prompt's tokens, NIXL's remote-prefill parameters, vLLM's status in the
verdict's words. Shared by the harness's handle and the live engine's."""

from __future__ import annotations

from typing import Any

from vllm.v1.request import RequestStatus

from matrix.adapters.protocol import FINISHED, LOADING, PREEMPTED, RUNNING, WAITING, Status


def distinct_prompt(request_id: str, length: int) -> list[int]:
    """Tokens no other request's prompt shares, so prefix caching shares only the prefixes
    cases ask for."""
    seed = sum(map(ord, request_id))
    return [(seed * 31 + index * 17) % 1000 + 1 for index in range(length)]


def remote_prefill(request_id: str, prompt_tokens: int) -> dict[str, Any]:
    """NIXL's ``kv_transfer_params`` of a request whose prompt's KV a prefill instance holds:
    the decode instance loads it asynchronously."""
    return {
        "do_remote_prefill": True,
        "do_remote_decode": False,
        "remote_engine_id": "prefill-0",
        "remote_request_id": request_id,
        "remote_block_ids": list(range(prompt_tokens)),
        "remote_host": "127.0.0.1",
        "remote_port": 1,
    }


def status_of(status: RequestStatus) -> Status:
    """vLLM's status in the verdict's words (see ``protocol.Status``)."""
    if RequestStatus.is_finished(status):
        return FINISHED
    name = status.name
    if name in (LOADING, RUNNING, PREEMPTED):
        return name  # type: ignore[no-any-return]
    return WAITING


# Every vLLM status in the verdict's words, read once (an enum member's name is slow to read).
STATUS_WORDS = {status: status_of(status) for status in RequestStatus}
