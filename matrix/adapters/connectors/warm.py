"""The tier's contents when a case starts, and the tensors a connector reads.

A request's tier tokens (``ConnectorSide.tier_tokens``) are put in the tier the way an
engine puts them there: an earlier request of those tokens runs on the same scheduler
(computed locally, its stores issued by vLLM's connector and reported by the worker), then
the engine's own ``Scheduler.reset_prefix_cache()`` drops the GPU copy, so the prefix can
only come from the tier. A shared store (``write_tier``) is written directly. None of these
steps is recorded: the case's steps start after them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vllm.sampling_params import SamplingParams
from vllm.v1.kv_cache_interface import KVCacheGroupSpec, KVCacheTensor
from vllm.v1.request import RequestStatus

from matrix.case.parts import RequestSpec

# Steps a warming request may take (a prefill and one token; more with chunked prefill).
WARM_STEPS = 256
WARM_SUFFIX = "~stored"


def metadata_tensors(
    groups: Sequence[KVCacheGroupSpec], pool: int, block_bytes: int
) -> list[KVCacheTensor]:
    """One tensor describing a pool of ``block_bytes`` a block, allocated by no one: what a
    scheduler side that sizes its tier from the GPU's bytes reads (every release divides its
    CPU bytes by them)."""
    pages = [group.kv_cache_spec.page_size_bytes for group in groups]
    layers = [name for group in groups for name in group.layer_names]
    return [
        KVCacheTensor(
            size=block_bytes * pool,
            layers=layers,
            layer_stride=max(pages),
            block_stride=block_bytes,
        )
    ]


def warm_tier(handle: Any, requests: Sequence[RequestSpec], pool: int) -> str:
    """Puts each request's tier tokens in the connector's tier before the case starts; why
    a request that warms it could not run to its end in this ``pool`` (the tier then keeps what
    it stored: whether that is what the case says is the lookup's to tell), or ""."""
    side = handle.side
    wanted = [(spec, side.tier_tokens(spec)) for spec in requests]
    wanted = [(spec, tokens) for spec, tokens in wanted if tokens > 0]
    cut = ""
    if not wanted:
        return cut
    in_flight = [spec for spec, _ in wanted if spec.stored is not None and spec.stored.in_flight]
    if in_flight:
        side.hold_stores(None)
    ran = False
    for spec, tokens in wanted:
        prompt = handle.prompt_of(spec)
        handle._prompts[spec.id] = prompt  # a later request's prefix copies it
        params = SamplingParams(max_tokens=1, ignore_eos=True)
        hashes = handle.request_of(spec.id, prompt[:tokens], params).block_hashes
        if side.write_tier(hashes, tokens):
            continue
        ran = True
        if not _run_alone(handle, spec.id + WARM_SUFFIX, prompt[:tokens], params, not in_flight):
            cut = cut or (
                f"the request that puts {spec.id}'s first {tokens} tokens in the tier cannot "
                f"run to its end in {pool} blocks"
            )
    if ran:
        handle.scheduler.reset_prefix_cache()
    if in_flight:
        side.hold_stores(max(spec.complete_store_after for spec in in_flight))
    return cut


def _quiet(handle: Any, stores_done: bool) -> bool:
    """Nothing of the warming request is left (its stores reported, if ``stores_done``)."""
    scheduler = handle.scheduler
    if scheduler.requests or handle.engine.batch_queue or scheduler.deferred_frees:
        return False
    return not (stores_done and (handle.side.busy() or handle.side.pinned()))


def _run_alone(
    handle: Any, request_id: str, prompt: list[int], params: SamplingParams, stores_done: bool
) -> bool:
    """Runs one request to its end (a load from the tier reported the step after it starts),
    then steps until the engine has nothing left of it (its stores reported, if
    ``stores_done``); False when it cannot run to its end in this pool: it is aborted (the
    tier keeps what it stored)."""
    scheduler = handle.scheduler
    handle.submit(request_id, prompt, params)
    loading: set[str] = set()
    reported: set[str] = set()  # each load is reported once
    for _ in range(WARM_STEPS):
        if _quiet(handle, stores_done):
            return True
        handle.engine.step(loading, set())
        reported |= loading
        loading = {
            r.request_id
            for r in scheduler.requests.values()
            if r.status == RequestStatus.WAITING_FOR_REMOTE_KVS
        } - reported
    finished = request_id not in scheduler.requests
    if not finished:
        scheduler.finish_requests([request_id], RequestStatus.FINISHED_ABORTED)
    for _ in range(WARM_STEPS):
        if _quiet(handle, stores_done):
            break
        handle.engine.step(set(), set())
    return finished
