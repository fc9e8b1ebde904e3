"""A case -> the configs a real engine would hand its scheduler: ``VllmConfig`` (model,
scheduler, cache, speculative decoding, the NIXL connector) and ``KVCacheConfig`` (the KV cache
groups and the pool). The scheduler only counts blocks, so no tensors are allocated.

A case's groups are written out (:func:`group_spec` turns each into vLLM's spec class, with
tiny heads: only block counts matter), or derived from a model description by ``layout``
(vLLM's own per-layer specs and grouping, real page sizes); :func:`with_layout` fills a
described case's groups from its derived layout, so the rest of the matrix reads them alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
from vllm.v1.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
)

from matrix.adapters.layout import DerivedLayout, derive_layout
from matrix.case.format import CaseFile
from matrix.case.model import (
    ENGINE_CONFIG_DEFAULT,
    LayoutSettings,
    PromptInBlocks,
    model_directory,
)
from matrix.case.parts import Group


def group_spec(group: Group, max_model_len: int, spec_tokens: int) -> KVCacheSpec:
    """One case group as vLLM's spec (tiny heads: only block counts matter)."""
    block_size = group.tokens_per_block(max_model_len)
    attention = {"num_kv_heads": 2, "head_size": 16, "dtype": torch.float32}
    if group.kind == "full":
        return FullAttentionSpec(block_size=block_size, **attention)
    if group.kind == "sliding_window":
        return SlidingWindowSpec(block_size=block_size, sliding_window=group.window, **attention)
    if group.kind == "chunked_local":
        chunk = group.window
        return ChunkedLocalAttentionSpec(
            block_size=block_size, attention_chunk_size=chunk, **attention
        )
    if group.kind == "mla":
        return MLAAttentionSpec(block_size=block_size, **attention)
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
    if case.engine.enable_prefix_caching is not None:
        return case.engine.enable_prefix_caching
    # A Mamba group in mode "none" runs with prefix caching off in real engines (0.33 asserts
    # it); the same set-up on every release keeps the releases comparable.
    return not any(g.kind == "mamba" and g.mamba_mode == "none" for g in case.groups)


def _scheduler_settings(case: CaseFile) -> dict[str, Any]:
    """``SchedulerConfig`` arguments: the harness defaults, overridden by ``engine:``."""
    engine = case.engine
    settings: dict[str, Any] = {
        "max_num_seqs": 16,
        "max_num_batched_tokens": max(2048, case.max_model_len),
        "async_scheduling": False,
    }
    chosen = {
        "max_num_seqs": engine.max_num_seqs,
        "max_num_batched_tokens": engine.max_num_batched_tokens,
        "enable_chunked_prefill": engine.enable_chunked_prefill,
        "async_scheduling": engine.async_scheduling,
    }
    settings.update({key: value for key, value in chosen.items() if value is not None})
    return settings


def _transfer_settings(case: CaseFile) -> dict[str, Any]:
    """``KVTransferConfig`` arguments: NIXL as a consumer, overridden by ``engine:``."""
    settings: dict[str, Any] = {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}
    if case.engine.kv_role is not None:
        settings["kv_role"] = case.engine.kv_role
    if case.engine.kv_load_failure_policy is not None:
        settings["kv_load_failure_policy"] = case.engine.kv_load_failure_policy
    return settings


@dataclass(frozen=True)
class EngineSettings:
    """Everything :func:`build_vllm_config` reads of a case. It is the config cache's key, so
    cases that agree on it share one config and the builder cannot read anything else: a new
    case key reaches the engine only by a field here."""

    model_dir: str
    max_model_len: int
    scheduler: tuple[tuple[str, Any], ...]  # SchedulerConfig arguments
    block_size: int  # the cache's: the smallest attention block
    prefix_caching: bool
    mamba_mode: str | None
    speculative: tuple[str, int] | None  # method, speculative tokens
    transfer: tuple[tuple[str, Any], ...]  # KVTransferConfig arguments


def engine_settings(case: CaseFile) -> EngineSettings:
    """What the engine configuration of ``case`` depends on."""
    # A described model's engine runs on the default tiny config: the scheduler reads the
    # model only through the KV cache layout, which is the described model's.
    model_dir = str(model_directory(ENGINE_CONFIG_DEFAULT if case.described else case.model))
    mamba_modes = sorted({g.mamba_mode for g in case.groups if g.kind == "mamba" and g.mamba_mode})
    speculative = case.speculative
    return EngineSettings(
        model_dir=model_dir,
        max_model_len=case.max_model_len,
        scheduler=tuple(sorted(_scheduler_settings(case).items())),
        block_size=_cache_block_size(case),
        prefix_caching=_prefix_caching(case),
        mamba_mode=mamba_modes[0] if mamba_modes else None,
        speculative=(speculative.method, speculative.num_tokens) if speculative else None,
        transfer=tuple(sorted(_transfer_settings(case).items())),
    )


_configs: dict[EngineSettings, VllmConfig] = {}


def vllm_config_for(case: CaseFile, pool: int) -> VllmConfig:
    """The case's engine configuration with a pool of ``pool`` blocks: built once per
    :class:`EngineSettings` (building it is most of a scheduler's set-up cost, and the
    scheduler only reads it), its block count set per call."""
    settings = engine_settings(case)
    config = _configs.get(settings)
    if config is None:
        config = _configs[settings] = build_vllm_config(settings)
    config.cache_config.num_gpu_blocks = pool
    return config


def async_refusal(case: CaseFile) -> str | None:
    """Why vLLM's config classes refuse async scheduling for a case they accept synchronously
    (a release that lacks it for the case's speculative method), or None."""
    if not case.engine.async_scheduling:
        return None
    try:
        vllm_config_for(case, 2)
        return None
    except ValueError as error:  # pydantic's ValidationError is one
        synchronous = case.model_copy(
            update={"engine": case.engine.model_copy(update={"async_scheduling": False})}
        )
        vllm_config_for(synchronous, 2)  # raises when the settings are wrong anyway
        lines = [line.strip() for line in str(error).splitlines()]
        reasons = [line for line in lines if line.startswith("Value error, ")] or lines[:1]
        return reasons[0].removeprefix("Value error, ").split(" [type=")[0]


def build_vllm_config(settings: EngineSettings) -> VllmConfig:
    """The engine configuration built by vLLM's own config classes on a CPU."""
    model = ModelConfig(
        model=settings.model_dir,
        skip_tokenizer_init=True,
        max_model_len=settings.max_model_len,
        dtype="float32",
    )
    scheduler = SchedulerConfig(
        max_model_len=settings.max_model_len,
        is_encoder_decoder=False,
        **dict(settings.scheduler),
    )
    cache = CacheConfig(
        block_size=settings.block_size, enable_prefix_caching=settings.prefix_caching
    )
    if settings.mamba_mode is not None:
        cache.mamba_cache_mode = settings.mamba_mode
    speculative = None
    if settings.speculative is not None:
        method, tokens = settings.speculative
        options: dict[str, Any] = {"model": settings.model_dir}
        if method == "ngram":
            options = {"prompt_lookup_min": 1, "prompt_lookup_max": 4}
        speculative = SpeculativeConfig(
            method=method,
            num_speculative_tokens=tokens,
            target_model_config=model,
            target_parallel_config=ParallelConfig(),
            **options,
        )
    config = VllmConfig(
        model_config=model,
        scheduler_config=scheduler,
        cache_config=cache,
        kv_transfer_config=KVTransferConfig(**dict(settings.transfer)),
        device_config=DeviceConfig("cpu"),
        speculative_config=speculative,
    )
    # Without a GPU the platform turns the hybrid manager off; a real engine would have it on.
    config.scheduler_config.disable_hybrid_kv_cache_manager = False
    return config


def kv_cache_config_for(case: CaseFile, pool: int) -> KVCacheConfig:
    """The KV cache layout the engine would hand the scheduler: one group per case group, and
    no tensors (the scheduler only counts blocks)."""
    if case.described is not None:
        groups = list(layout_for(case).specs)
        return KVCacheConfig(num_blocks=pool, kv_cache_tensors=[], kv_cache_groups=groups)
    # Real engines give a Mamba group one extra state block per speculative token.
    spec_tokens = _spec_tokens(case)
    return KVCacheConfig(
        num_blocks=pool,
        kv_cache_tensors=[],
        kv_cache_groups=[
            KVCacheGroupSpec([f"layer.{index}"], group_spec(g, case.max_model_len, spec_tokens))
            for index, g in enumerate(case.groups)
        ],
    )


def _spec_tokens(case: CaseFile) -> int:
    return case.speculative.num_tokens if case.speculative else 0


_layouts: dict[tuple[str, LayoutSettings, int, EngineSettings], DerivedLayout] = {}


def layout_for(case: CaseFile) -> DerivedLayout:
    """A described model's layout as the installed vLLM derives it, once per set of what the
    derivation reads. Raises ``layout.LayoutError`` when it cannot."""
    assert case.described is not None
    engine = engine_settings(case.model_copy(update={"groups": []}))
    key = (case.described.model_dump_json(), case.layout, _spec_tokens(case), engine)
    if key not in _layouts:
        # A fresh config: the derivation sets its block size as the engine's alignment would.
        derived = derive_layout(
            case.described, case.layout, _spec_tokens(case), build_vllm_config(engine)
        )
        _layouts[key] = derived
    return _layouts[key]


def case_groups(case: CaseFile) -> list[Group]:
    """The groups a case runs: written out, or a described model's derived layout."""
    if case.described is None:
        return list(case.groups)
    return [group.as_group() for group in layout_for(case).groups]


def with_layout(case: CaseFile) -> CaseFile:
    """The case with its groups (a described model's from its derived layout) and its prompts
    in tokens (one given in blocks counts the cache's attention block size)."""
    if case.described is not None:
        case = case.model_copy(update={"groups": case_groups(case)})
    block_size = _cache_block_size(case)
    requests = []
    for request in case.requests:
        if isinstance(request.prompt, PromptInBlocks):
            tokens = request.prompt.blocks * block_size + request.prompt.offset
            if not 0 < tokens <= case.max_model_len - request.max_tokens:
                raise ValueError(
                    f"request {request.id}: a prompt of {tokens} tokens (blocks of "
                    f"{block_size}) and {request.max_tokens} more do not fit max_model_len "
                    f"{case.max_model_len}"
                )
            request = request.model_copy(update={"prompt": tokens})
        requests.append(request)
    return case.model_copy(update={"requests": requests})


def scheduler_block_sizes(case: CaseFile) -> tuple[int, int]:
    """The scheduler's block size and the block size prefix-cache hashes are computed at, as
    vLLM resolves them from the layout."""
    from vllm.v1.core.kv_cache_utils import resolve_kv_cache_block_sizes

    case = with_layout(case)
    sizes = resolve_kv_cache_block_sizes(kv_cache_config_for(case, 2), vllm_config_for(case, 2))
    return int(sizes[0]), int(sizes[1])
