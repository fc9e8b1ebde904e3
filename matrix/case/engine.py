"""The engine's side of a case: its settings (``engine:``), how many drafts the simulated model
accepts (``speculative.accept``), the events an engine or a worker causes (``abort:``,
``fail_load:``) and shared prompt prefixes (``prefix:``).

Pydantic models only. The values of ``engine:`` are checked here for type only: vLLM's own
config classes judge them when a scheduler is built; the rules spanning a case's requests
(prefixes, accepted drafts) are ``matrix.case.parts.check_prefixes_and_accept``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from matrix.case.strict import Strict


class Engine(Strict):
    """vLLM settings the scheduler sees; unset keys keep the harness defaults (16 sequences,
    chunked prefill on, prefix caching on unless a Mamba group runs in mode none, the
    synchronous scheduler, NIXL as a consumer, vLLM's default load-failure policy)."""

    max_num_seqs: Annotated[int, Field(ge=1, le=1024)] | None = None
    max_num_batched_tokens: Annotated[int, Field(ge=1)] | None = None
    # --max-num-scheduled-tokens: the tokens a step may schedule, below the batch's size
    # where the model appends its own (vLLM's default: max_num_batched_tokens).
    max_num_scheduled_tokens: Annotated[int, Field(ge=1)] | None = None
    enable_chunked_prefill: bool | None = None
    enable_prefix_caching: bool | None = None
    kv_role: str | None = None
    # True: AsyncScheduler driven as EngineCore.step_with_batch_queue drives it.
    async_scheduling: bool | None = None
    kv_load_failure_policy: str | None = None
    # vLLM 0.34's --max-num-inflight-kv-loads: at most this many requests hold blocks for an
    # async load before they run; with it, loads also start while the batch is full.
    max_num_inflight_kv_loads: Annotated[int, Field(ge=1, le=1024)] | None = None

    # Admission settings real deployments turn on (docs/cases.md): the KV cache fraction kept
    # free when admitting waiting or preempted requests; whether a new request's whole prompt
    # must fit before its first chunk is admitted (vLLM's default: on); and the model runner
    # the scheduler sends its batches to (V1 takes a preempted request back as cached and
    # resumed, V2 as new; 0.33's default is V2 where it is supported).
    watermark: Annotated[float, Field(ge=0.0, lt=1.0)] | None = None
    scheduler_reserve_full_isl: bool | None = None
    # A prompt's chunk is at most this many tokens (--long-prefill-token-threshold): a long
    # prefill leaves the step's budget to others.
    long_prefill_token_threshold: Annotated[int, Field(ge=0)] | None = None
    model_runner: Literal["v1", "v2"] | None = None
    # The waiting queues' order (--scheduling-policy): first come first served, or by each
    # request's ``priority`` (lower first), arrival breaking ties.
    policy: Literal["fcfs", "priority"] | None = None
    # --prefill-schedule-interval: prefill admitted once every N steps while requests decode
    # (applied by the scheduler itself from 0.33; a data-parallel engine's core before).
    prefill_schedule_interval: Annotated[int, Field(ge=1, le=1000)] | None = None
    # --prefix-cache-retention-interval (vLLM 0.31+): which sliding-window and Mamba prefix-cache
    # checkpoints are kept: every one ("dense", vLLM's None), only the replay boundary (0), or
    # one per so many tokens. Unset: KVCacheConfig's own default (dense; an engine's is 0).
    prefix_cache_retention_interval: Annotated[int, Field(ge=0)] | Literal["dense"] | None = None


# Accepted drafts per decode step of each request, the last value repeating; "all" and "none"
# are the two extremes.
Accept = Literal["all", "none"] | Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]


def accepted_drafts(accept: Accept, decode_step: int, drafts: int) -> int:
    """How many of ``drafts`` the simulated model accepts at a request's ``decode_step``
    (0-based)."""
    if accept == "all":
        return drafts
    if accept == "none":
        return 0
    return min(drafts, accept[min(decode_step, len(accept) - 1)])


class Prefix(Strict):
    """The request starts with the first ``tokens`` tokens of request ``of``'s prompt."""

    of: Annotated[str, Field(min_length=1)]
    tokens: Annotated[int, Field(ge=1)]
