"""A case -> the ``VllmConfig`` a real engine would hand its scheduler (model, scheduler,
cache, speculative decoding, the NIXL connector), built by vLLM's own config classes once per
:class:`EngineSettings`. The KV cache layout is ``kv_cache``'s."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

from matrix.adapters.connectors import family_of
from matrix.adapters.engine_options import model_runner
from matrix.case.format import CaseFile
from matrix.case.json_input import read_json
from matrix.case.model_paths import ENGINE_CONFIG_DEFAULT, model_directory
from matrix.case.parts import cache_block_size as groups_block_size
from matrix.frozen import fast_init

EXTRA_CONFIG = "kv_connector_extra_config"


def cache_block_size(case: CaseFile) -> int:
    """The engine's cache block size (:func:`~matrix.case.parts.cache_block_size`)."""
    return groups_block_size(case.groups, case.max_model_len)


def _prefix_caching(case: CaseFile) -> bool:
    if case.engine.enable_prefix_caching is not None:
        return case.engine.enable_prefix_caching
    # A Mamba group in mode "none" runs with prefix caching off in real engines (0.33 asserts
    # it); the same set-up on every release keeps the releases comparable.
    return not any(g.kind == "mamba" and g.mamba_mode == "none" for g in case.groups)


def retention_setting(case: CaseFile) -> dict[str, int | None]:
    """The case's ``engine.prefix_cache_retention_interval`` as vLLM's ``CacheConfig`` and
    ``KVCacheConfig`` take it ("dense" is their None); empty where the case leaves it unset."""
    interval = case.engine.prefix_cache_retention_interval
    if interval is None:
        return {}
    return {"prefix_cache_retention_interval": None if interval == "dense" else interval}


def scheduler_settings(case: CaseFile) -> dict[str, Any]:
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
        "max_num_scheduled_tokens": engine.max_num_scheduled_tokens,
        "enable_chunked_prefill": engine.enable_chunked_prefill,
        "async_scheduling": engine.async_scheduling,
        "max_num_inflight_kv_loads": engine.max_num_inflight_kv_loads,
        "watermark": engine.watermark,
        "scheduler_reserve_full_isl": engine.scheduler_reserve_full_isl,
        "long_prefill_token_threshold": engine.long_prefill_token_threshold,
        "policy": engine.policy,
        "prefill_schedule_interval": engine.prefill_schedule_interval,
    }
    settings.update({key: value for key, value in chosen.items() if value is not None})
    return settings


def _transfer_settings(case: CaseFile) -> dict[str, Any]:
    """``KVTransferConfig`` arguments: the case's connector in its role (NIXL as a consumer
    by default), overridden by ``engine:``; its extra config as JSON (a settings key is
    hashed)."""
    settings = family_of(case).transfer_config(case)
    extra = settings.pop("kv_connector_extra_config", None)
    if extra is not None:
        settings[EXTRA_CONFIG] = json.dumps(extra, sort_keys=True)
    if case.engine.kv_role is not None:
        settings["kv_role"] = case.engine.kv_role
    if case.engine.kv_load_failure_policy is not None:
        settings["kv_load_failure_policy"] = case.engine.kv_load_failure_policy
    return settings


@fast_init
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
    model_runner: str | None = None  # engine.model_runner: v1, v2, or the release's own
    cache: tuple[tuple[str, Any], ...] = ()  # CacheConfig arguments the case sets


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
        scheduler=tuple(sorted(scheduler_settings(case).items())),
        block_size=cache_block_size(case),
        prefix_caching=_prefix_caching(case),
        mamba_mode=mamba_modes[0] if mamba_modes else None,
        speculative=(speculative.method, speculative.num_tokens) if speculative else None,
        transfer=tuple(sorted(_transfer_settings(case).items())),
        model_runner=case.engine.model_runner,
        cache=tuple(sorted(retention_setting(case).items())),
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


def runner_refusal(case: CaseFile) -> str | None:
    """Why vLLM's config classes refuse the model runner a case asks for (0.30-0.32 refuse V2
    without Triton), or None."""
    if case.engine.model_runner is None:
        return None
    try:
        vllm_config_for(case, 2)
        return None
    except ValueError as error:  # pydantic's ValidationError is one
        lines = [line.strip() for line in str(error).splitlines()]
        reasons = [line for line in lines if line.startswith("Value error, ")] or lines[:1]
        return reasons[0].removeprefix("Value error, ").split(" [type=")[0]


@dataclass(frozen=True)
class _ContextLength:
    """``hf_overrides`` giving the engine's stand-in model a context as long as the case's
    ``max_model_len``: the scheduler reads the model only through the KV cache layout, so
    the stand-in's own length must not bound a case (a model file's own length is checked
    against vLLM's reading of that file). Callable, so that vLLM hands it to the draft
    model's config too."""

    length: int

    def __call__(self, config: Any) -> Any:
        stated = getattr(config, "max_position_embeddings", None) or 0
        config.max_position_embeddings = max(stated, self.length)
        return config


def _longer_context(settings: EngineSettings) -> _ContextLength | dict[str, Any]:
    path = Path(settings.model_dir) / "config.json"
    data = read_json(path)  # bounded, as every input is read
    stated = data.get("max_position_embeddings") if isinstance(data, dict) else None
    if isinstance(stated, int) and settings.max_model_len > stated:
        return _ContextLength(settings.max_model_len)
    return {}


# The model's config per (directory, max_model_len), as vLLM builds it: reading config.json
# through transformers is most of its cost, and engine configs that differ in the scheduler,
# cache or speculative settings read the same one. Each engine config gets its own deep copy
# (VllmConfig updates its model config), the same as one built anew.
_model_configs: dict[tuple[str, int], ModelConfig] = {}


def _model_config(settings: EngineSettings) -> ModelConfig:
    key = (settings.model_dir, settings.max_model_len)
    if key not in _model_configs:
        _model_configs[key] = ModelConfig(
            model=settings.model_dir,
            skip_tokenizer_init=True,
            max_model_len=settings.max_model_len,
            dtype="float32",
            hf_overrides=_longer_context(settings),
        )
    return copy.deepcopy(_model_configs[key])


def transfer_arguments(settings: EngineSettings) -> dict[str, Any]:
    """``KVTransferConfig``'s arguments, the extra config read back from its JSON."""
    arguments = dict(settings.transfer)
    if EXTRA_CONFIG in arguments:
        arguments[EXTRA_CONFIG] = json.loads(arguments[EXTRA_CONFIG])
    return arguments


def build_vllm_config(settings: EngineSettings) -> VllmConfig:
    """The engine configuration built by vLLM's own config classes on a CPU."""
    model = _model_config(settings)
    scheduler = SchedulerConfig(
        max_model_len=settings.max_model_len,
        is_encoder_decoder=False,
        **dict(settings.scheduler),
    )
    cache = CacheConfig(
        block_size=settings.block_size,
        enable_prefix_caching=settings.prefix_caching,
        **dict(settings.cache),
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
    with model_runner(settings.model_runner):
        config = VllmConfig(
            model_config=model,
            scheduler_config=scheduler,
            cache_config=cache,
            kv_transfer_config=KVTransferConfig(**transfer_arguments(settings)),
            device_config=DeviceConfig("cpu"),
            speculative_config=speculative,
        )
    # Without a GPU the platform turns the hybrid manager off; a real engine would have it on.
    config.scheduler_config.disable_hybrid_kv_cache_manager = False
    return config
