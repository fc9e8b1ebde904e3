"""Each layer's ``KVCacheSpec`` for a model description, with vLLM's spec classes: the attention
layers' numbers on one tensor-parallel rank (``ModelConfig.get_num_kv_heads``, ported: it needs
a model built on a GPU) and a Mamba / linear-attention layer's state shapes and dtypes from the
model class's own ``get_mamba_state_shape_from_config`` / ``get_mamba_state_dtype_from_config``
(after the model's own config hook, which picks NemotronH's state dtype). ``layout`` groups
them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch
from vllm.config import CacheConfig, ParallelConfig
from vllm.model_executor.models import ModelRegistry
from vllm.v1.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
)

from matrix.adapters.model_files import HfConfigError, hf_config_of
from matrix.case.model import LayerKind, LayoutSettings, ModelDescription


class LayoutError(Exception):
    """The installed vLLM cannot derive this model's layout; the message says why."""


def spec_of(spec_type: type[KVCacheSpec], **fields: Any) -> KVCacheSpec:
    """A spec with the fields this release's class has (releases add fields over time)."""
    known = {f.name for f in dataclasses.fields(spec_type)}
    return spec_type(**{k: v for k, v in fields.items() if k in known})


def torch_dtype(name: str) -> torch.dtype:
    """torch's dtype for a description's dtype name (``fp8``: the KV cache's e4m3)."""
    dtype = getattr(torch, {"fp8": "float8_e4m3fn"}.get(name, name))
    assert isinstance(dtype, torch.dtype)
    return dtype


@dataclass(frozen=True)
class Attention:
    """One attention layer's numbers on one tensor-parallel rank."""

    num_kv_heads: int
    head_size: int
    dtype: torch.dtype
    mla: bool

    def spec(self, kind: LayerKind, block_size: int, model: ModelDescription) -> KVCacheSpec:
        """A layer of this kind's spec, with the block size its group has."""
        common = {
            "block_size": block_size,
            "num_kv_heads": self.num_kv_heads,
            "head_size": self.head_size,
            "dtype": self.dtype,
        }
        if kind == "mla":
            return spec_of(MLAAttentionSpec, **common)
        if kind == "sliding_window":
            return spec_of(SlidingWindowSpec, sliding_window=model.sliding_window, **common)
        if kind == "chunked_local":
            chunk = model.attention_chunk_size
            return spec_of(ChunkedLocalAttentionSpec, attention_chunk_size=chunk, **common)
        return spec_of(FullAttentionSpec, **common)


def attention_numbers(model: ModelDescription, settings: LayoutSettings) -> Attention | None:
    """The attention layers' numbers on one rank; None for a model without attention (pure
    Mamba)."""
    if set(model.layer_kinds()) <= {"mamba", "no_cache"}:
        return None
    dtype = torch_dtype(model.dtype if settings.kv_cache_dtype == "auto" else "fp8")
    if model.mla is not None and model.num_kv_heads is None:
        # MLA caches one latent per token, shared by all heads, on every rank.
        return Attention(1, model.mla.kv_lora_rank + model.mla.qk_rope_head_dim, dtype, True)
    assert model.num_kv_heads is not None and model.head_size is not None
    # ModelConfig.get_num_kv_heads: heads split over ranks, replicated when fewer than ranks.
    return Attention(max(1, model.num_kv_heads // settings.tp), model.head_size, dtype, False)


def mamba_state(
    model: ModelDescription,
    settings: LayoutSettings,
    spec_tokens: int,
    hf_config: Any,
    max_model_len: int,
) -> tuple[tuple[tuple[int, ...], ...], tuple[torch.dtype, ...]]:
    """The model class's own Mamba state shapes and dtypes for these settings, from
    ``hf_config`` (vLLM's reading of a config.json) or the description's ``hf_config``."""
    try:
        model_class: Any = ModelRegistry.models[model.architecture].load_model_cls()
    except ImportError as error:
        raise LayoutError(f"{model.architecture} does not import here: {error}") from error
    if hf_config is None:
        try:
            hf_config = hf_config_of(model.hf_config)
        except HfConfigError as error:
            raise LayoutError(f"hf_config: {error}") from None
    cache = CacheConfig(mamba_cache_mode=settings.mamba_mode)
    speculative = SimpleNamespace(num_speculative_tokens=spec_tokens) if spec_tokens else None
    # The slice of VllmConfig these class methods read: a whole one needs a ModelConfig, whose
    # first build per architecture inspects the model class in a subprocess (tens of seconds).
    engine = SimpleNamespace(
        model_config=SimpleNamespace(
            hf_config=hf_config,
            hf_text_config=hf_config,
            dtype=torch_dtype(model.dtype),
            architecture=model.architecture,
            max_model_len=max_model_len,
        ),
        # The pure Mamba models' hook asks it where prefix caching is on (mode align).
        scheduler_config=SimpleNamespace(enable_chunked_prefill=True),
        parallel_config=ParallelConfig(tensor_parallel_size=settings.tp),
        cache_config=cache,
        speculative_config=speculative,
        num_speculative_tokens=spec_tokens,
    )
    from vllm.model_executor.models.config import MODELS_CONFIG_MAP

    hook = MODELS_CONFIG_MAP.get(model.architecture)
    if hook is not None:
        hook.verify_and_update_config(engine)
    try:
        shapes = model_class.get_mamba_state_shape_from_config(engine)
        dtypes = model_class.get_mamba_state_dtype_from_config(engine)
    except AttributeError as error:  # a key the model class reads that the config lacks
        missing = getattr(error, "name", None) or str(error)
        raise LayoutError(
            f"hf_config: vLLM's {model.architecture} reads '{missing}' for its Mamba state, "
            "and the config has no such key"
        ) from None
    return tuple(tuple(s) for s in shapes), tuple(dtypes)
