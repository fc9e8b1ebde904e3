"""vLLM 0.30, and everything later releases share: the oldest supported release.

0.30 reserves, at an async-load admission, the blocks the other in-flight loads still need
for their full sequence, with no speculative-decode margin. Every later adapter subclasses
this one and overrides only the hooks its release changed (``stock_margin``,
``drop_stock_margin``, ``coordinator_options``) and its ``requirements``.

Shared by 0.30-0.33: ``Scheduler(hash_block_size=...)``, ``resolve_kv_cache_block_sizes``,
the ``_inflight_prefills`` set and ``_inflight_prefill_reserved_blocks``, the connector and
model-output types. The queue of requests holding KV while waiting was renamed
(``skipped_waiting`` in 0.30, ``kv_holding_waiting`` later); the handle reads request states
from ``Scheduler.requests`` and never touches a queue, so the rename needs no hook.
"""

from __future__ import annotations

import inspect
import logging
import os
import typing
from pathlib import Path
from typing import Any, ClassVar

from matrix.adapters import (
    FINISHED,
    LOADING,
    Geometry,
    GroupGeometry,
    RequestState,
    Requirement,
    SchedulerState,
    StepOutcome,
    UnsupportedRelease,
)
from matrix.schema import CaseFile, Group, RequestSpec

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

try:
    import torch
    from vllm.config import (
        CacheConfig,
        DeviceConfig,
        KVTransferConfig,
        ModelConfig,
        ParallelConfig,
        SchedulerConfig,
        SpeculativeConfig,
        VllmConfig,
    )
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_coordinator import KVCacheCoordinator
    from vllm.v1.core.kv_cache_utils import (
        get_request_block_hasher,
        init_none_hash,
        resolve_kv_cache_block_sizes,
    )
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import (
        FullAttentionSpec,
        KVCacheConfig,
        KVCacheGroupSpec,
        KVCacheSpec,
        MambaSpec,
        SlidingWindowSpec,
    )
    from vllm.v1.outputs import DraftTokenIds, KVConnectorOutput, ModelRunnerOutput
    from vllm.v1.request import Request, RequestStatus
    from vllm.v1.structured_output import StructuredOutputManager
except ImportError as error:  # pragma: no cover - depends on the installed release
    raise UnsupportedRelease(f"vLLM lacks an import the adapters need: {error}") from error

MODELS_DIR = Path(__file__).resolve().parent.parent / "models"
SAMPLED_TOKEN = 7
DRAFT_TOKEN = 11
init_none_hash(sha256)


def _model_dir(name: str) -> str:
    shipped = MODELS_DIR / name
    return str(shipped if shipped.is_dir() else Path(name))


def group_spec(group: Group, max_model_len: int, spec_tokens: int) -> KVCacheSpec:
    block_size = max_model_len if group.block_size == "max_model_len" else group.block_size
    attention = {"num_kv_heads": 2, "head_size": 16, "dtype": torch.float32}
    if group.kind == "full":
        return FullAttentionSpec(block_size=block_size, **attention)
    if group.kind == "sliding_window":
        return SlidingWindowSpec(block_size=block_size, sliding_window=group.window, **attention)
    return MambaSpec(
        block_size=block_size,
        shapes=((16,),),
        dtypes=(torch.float32,),
        mamba_cache_mode=group.mamba_mode,
        num_speculative_blocks=spec_tokens,
    )


def _cache_block_size(case: CaseFile) -> int:
    sizes = [
        g.block_size for g in case.groups if g.kind != "mamba" and isinstance(g.block_size, int)
    ]
    return min(sizes) if sizes else case.max_model_len


def _prefix_caching(case: CaseFile) -> bool:
    # A Mamba group in mode "none" runs with prefix caching off in real engines (0.33 asserts
    # it); the same set-up on every release keeps the releases comparable.
    return not any(g.kind == "mamba" and g.mamba_mode == "none" for g in case.groups)


_configs: dict[str, VllmConfig] = {}


def vllm_config_for(case: CaseFile, pool: int) -> VllmConfig:
    """Cases differing only in pool size, requests or events share one config: building it is
    most of a scheduler's set-up cost, and the scheduler only reads it."""
    key = case.model_dump_json(include={"model", "max_model_len", "groups", "speculative"})
    config = _configs.get(key)
    if config is None:
        config = _configs[key] = build_vllm_config(case)
    config.cache_config.num_gpu_blocks = pool
    return config


def build_vllm_config(case: CaseFile) -> VllmConfig:
    model_dir = _model_dir(case.model)
    model = ModelConfig(
        model=model_dir, skip_tokenizer_init=True, max_model_len=case.max_model_len, dtype="float32"
    )
    scheduler = SchedulerConfig(
        max_num_seqs=16,
        max_num_batched_tokens=max(2048, case.max_model_len),
        max_model_len=case.max_model_len,
        is_encoder_decoder=False,
        async_scheduling=False,
    )
    mamba_modes = {g.mamba_mode for g in case.groups if g.kind == "mamba"}
    cache = CacheConfig(
        block_size=_cache_block_size(case), enable_prefix_caching=_prefix_caching(case)
    )
    if mamba_modes:
        cache.mamba_cache_mode = mamba_modes.pop()
    speculative = None
    if case.speculative is not None:
        options: dict[str, Any] = {}
        if case.speculative.method == "ngram":
            options = {"prompt_lookup_min": 1, "prompt_lookup_max": 4}
        else:
            options = {"model": model_dir}
        speculative = SpeculativeConfig(
            method=case.speculative.method,
            num_speculative_tokens=case.speculative.num_tokens,
            target_model_config=model,
            target_parallel_config=ParallelConfig(),
            **options,
        )
    config = VllmConfig(
        model_config=model,
        scheduler_config=scheduler,
        cache_config=cache,
        kv_transfer_config=KVTransferConfig(kv_connector="NixlConnector", kv_role="kv_consumer"),
        device_config=DeviceConfig("cpu"),
        speculative_config=speculative,
    )
    # Without a GPU the platform turns the hybrid manager off; a real engine would have it on.
    config.scheduler_config.disable_hybrid_kv_cache_manager = False
    return config


def kv_cache_config_for(case: CaseFile, pool: int) -> KVCacheConfig:
    """The KV cache layout the engine would hand the scheduler: one group per case group, and
    no tensors (the scheduler only counts blocks)."""
    # Real engines give a Mamba group one extra state block per speculative token.
    spec_tokens = case.speculative.num_tokens if case.speculative else 0
    return KVCacheConfig(
        num_blocks=pool,
        kv_cache_tensors=[],
        kv_cache_groups=[
            KVCacheGroupSpec([f"layer.{index}"], group_spec(g, case.max_model_len, spec_tokens))
            for index, g in enumerate(case.groups)
        ],
    )


class Vllm030Handle:
    def __init__(self, case: CaseFile, pool: int) -> None:
        config = vllm_config_for(case, pool)
        kv_cache_config = kv_cache_config_for(case, pool)
        block_size, hash_block_size = resolve_kv_cache_block_sizes(kv_cache_config, config)
        self.scheduler: Any = Scheduler(
            config,
            kv_cache_config,
            StructuredOutputManager(config),
            block_size=block_size,
            hash_block_size=hash_block_size,
            log_stats=False,
        )
        self._block_hasher = get_request_block_hasher(hash_block_size, sha256)
        self._known: list[str] = []
        self._reported_done: set[str] = set()

    def geometry(self) -> Geometry:
        scheduler = self.scheduler
        spec_tokens, lookahead = scheduler.num_spec_tokens, scheduler.num_lookahead_tokens
        managers = scheduler.kv_cache_manager.coordinator.single_type_managers
        return Geometry(
            spec_step_tokens=1 + spec_tokens + lookahead if spec_tokens else 0,
            scheduler_block_size=scheduler.block_size,
            groups=tuple(
                GroupGeometry(m.block_size, isinstance(m.kv_cache_spec, MambaSpec))
                for m in managers
            ),
            num_lookahead_tokens=lookahead,
        )

    def add_request(self, spec: RequestSpec) -> None:
        params = SamplingParams(max_tokens=spec.max_tokens, ignore_eos=True)
        if spec.async_load:
            params.extra_args = {
                "kv_transfer_params": {
                    "do_remote_prefill": True,
                    "do_remote_decode": False,
                    "remote_engine_id": "prefill-0",
                    "remote_request_id": spec.id,
                    "remote_block_ids": list(range(spec.prompt)),
                    "remote_host": "127.0.0.1",
                    "remote_port": 1,
                }
            }
        # Distinct prompts per request so prefix caching cannot share blocks between them.
        seed = sum(map(ord, spec.id))
        prompt = [(seed * 31 + index * 17) % 1000 + 1 for index in range(spec.prompt)]
        self.scheduler.add_request(
            Request(
                request_id=spec.id,
                prompt_token_ids=prompt,
                sampling_params=params,
                pooling_params=None,
                block_hasher=self._block_hasher,
            )
        )
        self._known.append(spec.id)

    def step(self, finished_loads: set[str]) -> StepOutcome:
        scheduler = self.scheduler
        output = scheduler.schedule()
        free_while_running = scheduler.kv_cache_manager.block_pool.get_num_free_blocks()
        request_ids = list(output.num_scheduled_tokens)
        sampled = []
        for request_id in request_ids:
            request = scheduler.requests[request_id]
            drafts = len(output.scheduled_spec_decode_tokens.get(request_id, ()))
            reaches_end = (
                request.num_computed_tokens + output.num_scheduled_tokens[request_id]
                >= request.num_tokens
            )
            # The simulated model accepts every draft: the fastest growth a request can have.
            sampled.append([SAMPLED_TOKEN] * (1 + drafts) if reaches_end else [])
        connector_output = (
            KVConnectorOutput(finished_recving=set(finished_loads)) if finished_loads else None
        )
        model_output = ModelRunnerOutput(
            req_ids=request_ids,
            req_id_to_index={r: i for i, r in enumerate(request_ids)},
            sampled_token_ids=sampled,
            kv_connector_output=connector_output,
        )
        self._reported_done |= finished_loads
        scheduler.update_from_output(output, model_output)
        if scheduler.num_spec_tokens:
            running = [r.request_id for r in scheduler.running]
            if running:
                scheduler.update_draft_token_ids(
                    DraftTokenIds(
                        running, [[DRAFT_TOKEN] * scheduler.num_spec_tokens for _ in running]
                    )
                )
        return StepOutcome(dict(output.num_scheduled_tokens), free_while_running)

    def state(self) -> SchedulerState:
        scheduler = self.scheduler
        requests = []
        for request_id in self._known:
            reported = request_id in self._reported_done
            request = scheduler.requests.get(request_id)
            if request is None:  # finished requests leave the scheduler
                requests.append(RequestState(request_id, FINISHED, 0, reported, 0))
                continue
            status = request.status
            requests.append(
                RequestState(
                    request_id,
                    FINISHED if RequestStatus.is_finished(status) else status.name,
                    request.num_computed_tokens,
                    reported,
                    request.num_preemptions,
                )
            )
        return SchedulerState(
            tuple(requests),
            scheduler.kv_cache_manager.block_pool.get_num_free_blocks(),
            scheduler._inflight_prefill_reserved_blocks() + self.stock_margin(),
        )

    # The hooks later releases override.

    def stock_margin(self) -> int:
        """Blocks the stock admission keeps free for the admitting request's speculative step."""
        return 0

    def drop_stock_margin(self) -> None:
        """Turn the stock margin off on this instance, so a variant's own margin replaces it."""

    def coordinator_options(self, request: Any) -> dict[str, Any]:
        """Release-specific arguments of ``get_num_blocks_to_allocate``."""
        return {}

    def remaining_blocks(self, request: Any, spec_tokens_through_coordinator: bool) -> int:
        """Blocks an in-flight load still needs to hold its whole sequence; with
        ``spec_tokens_through_coordinator``, also its first speculative step (0.32's rule)."""
        scheduler = self.scheduler
        full = min(request.num_tokens, scheduler.max_model_len)
        num_tokens = full
        if spec_tokens_through_coordinator and scheduler.num_spec_tokens:
            num_tokens += 1 + scheduler.num_spec_tokens + scheduler.num_lookahead_tokens
        manager = scheduler.kv_cache_manager
        blocks: int = manager.coordinator.get_num_blocks_to_allocate(
            request_id=request.request_id,
            num_tokens=num_tokens,
            new_computed_blocks=manager.empty_kv_cache_blocks.blocks,
            num_encoder_tokens=0,
            total_computed_tokens=request.num_computed_tokens,
            num_local_computed_tokens=request.num_computed_tokens,
            num_tokens_main_model=full,
            apply_admission_cap=True,
            **self.coordinator_options(request),
        )
        return blocks

    def install_reservation(
        self, admission_margin: int, per_request_margin: int, spec_tokens_through_coordinator: bool
    ) -> None:
        scheduler = self.scheduler

        def reserved_for_inflight_loads() -> int:
            inflight = sum(
                self.remaining_blocks(request, spec_tokens_through_coordinator) + per_request_margin
                for request in scheduler._inflight_prefills
            )
            return inflight + admission_margin

        # Instance attributes shadow the class's, so only this scheduler sees the variant.
        self.drop_stock_margin()
        scheduler._inflight_prefill_reserved_blocks = reserved_for_inflight_loads


def init_assigns(name: str) -> bool:
    """``Scheduler.__init__`` sets ``self.<name>`` (the names its code object uses)."""
    return name in Scheduler.__init__.__code__.co_names


def accepts(function: Any, *parameters: str) -> bool:
    return set(parameters) <= set(inspect.signature(function).parameters)


def release_mamba_modes() -> tuple[str, ...]:
    field = CacheConfig.__dataclass_fields__["mamba_cache_mode"]
    return typing.get_args(field.type) or ("none", "align")


SHARED_REQUIREMENTS = (
    Requirement(
        "Scheduler._inflight_prefill_reserved_blocks (the async-load reservation variants replace)",
        lambda: callable(getattr(Scheduler, "_inflight_prefill_reserved_blocks", None)),
    ),
    Requirement(
        "Scheduler._inflight_prefills (the set of in-flight async loads)",
        lambda: init_assigns("_inflight_prefills"),
    ),
    Requirement(
        "Scheduler(hash_block_size=...)", lambda: accepts(Scheduler.__init__, "hash_block_size")
    ),
    Requirement(
        "KVCacheCoordinator.get_num_blocks_to_allocate(num_tokens_main_model=..., "
        "apply_admission_cap=..., ...) (an in-flight load's remaining blocks)",
        lambda: accepts(
            KVCacheCoordinator.get_num_blocks_to_allocate,
            *("request_id", "num_tokens", "new_computed_blocks", "num_encoder_tokens"),
            *("total_computed_tokens", "num_local_computed_tokens", "num_tokens_main_model"),
            "apply_admission_cap",
        ),
    ),
    Requirement(
        "ModelRunnerOutput(req_ids, req_id_to_index, sampled_token_ids, kv_connector_output)",
        lambda: accepts(
            ModelRunnerOutput,
            *("req_ids", "req_id_to_index", "sampled_token_ids", "kv_connector_output"),
        ),
    ),
    Requirement(
        "KVConnectorOutput(finished_recving=...) (how a load reports completion)",
        lambda: accepts(KVConnectorOutput, "finished_recving"),
    ),
    Requirement(
        "Request(..., block_hasher=...)",
        lambda: accepts(Request, "prompt_token_ids", "sampling_params", "block_hasher"),
    ),
    Requirement(
        "CacheConfig.mamba_cache_mode",
        lambda: "mamba_cache_mode" in CacheConfig.__dataclass_fields__,
    ),
    Requirement(
        "RequestStatus.WAITING_FOR_REMOTE_KVS (a request whose KV is loading)",
        lambda: hasattr(RequestStatus, LOADING),
    ),
    Requirement(
        "Scheduler.update_draft_token_ids (the drafts a step proposes)",
        lambda: callable(getattr(Scheduler, "update_draft_token_ids", None)),
    ),
)


class Vllm030:
    handle_type: ClassVar[type[Vllm030Handle]] = Vllm030Handle
    requirements: ClassVar[tuple[Requirement, ...]] = (
        *SHARED_REQUIREMENTS,
        Requirement(
            "an admission with no speculative-decode margin (0.30's; with "
            "Scheduler._spec_decode_step_blocks a later adapter applies)",
            lambda: (
                not hasattr(Scheduler, "_spec_decode_step_blocks")
                and not init_assigns("_spec_decode_step_blocks")
            ),
        ),
    )

    def __init__(self, release: str) -> None:
        self.release = release
        logging.getLogger("vllm").setLevel(logging.ERROR)

    def build(self, case: CaseFile, pool: int) -> Vllm030Handle:
        return self.handle_type(case, pool)

    def unsupported(self, case: CaseFile) -> str | None:
        modes = release_mamba_modes()
        for group in case.groups:
            if group.kind == "mamba" and group.mamba_mode not in modes:
                return (
                    f"vLLM {self.release} has no Mamba cache mode '{group.mamba_mode}' "
                    f"(it has: {', '.join(modes)})"
                )
        return None
