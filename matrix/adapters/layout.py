"""A model description -> the KV cache groups the installed vLLM would give it.

Each layer's ``KVCacheSpec`` is built with vLLM's spec classes (``layer_specs``: the attention
layers' numbers per rank, a Mamba / linear-attention layer's state from the model class's own
methods, and the prefill checkpoint blocks its layer class adds: ``mamba_layers``); the layers
are grouped by vLLM's ``get_kv_cache_groups``.

Two pieces of the engine's path need a model built on a GPU (its attention layers) and are
ported as small as they go: the KV heads per tensor-parallel rank
(``ModelConfig.get_num_kv_heads``, in ``layer_specs``) and the hybrid block-size alignment
(``Platform._align_hybrid_block_size``: the attention block grows, in steps of the attention
backend's kernel block, until an attention page holds a Mamba state page). The backend, and so
the block, depend on the device (``matrix.adapters.devices``). Tests hold both against vLLM's
own functions on a model where both run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vllm.config import VllmConfig
from vllm.v1.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheGroupSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
)

from matrix.adapters.devices import DeviceError, aligned_block, device_layout
from matrix.adapters.layer_specs import LayoutError as LayoutError  # its importers' name for it
from matrix.adapters.layer_specs import attention_numbers, mamba_state, spec_of
from matrix.adapters.mamba_layers import with_layer_checkpoints
from matrix.adapters.registry import architecture_problem
from matrix.case.model import LayerKind, LayoutSettings, ModelDescription
from matrix.case.parts import Group, GroupKind, MambaMode


@dataclass(frozen=True)
class DerivedGroup:
    """One KV cache group vLLM derived, in the words of a case's groups."""

    kind: GroupKind
    block_size: int
    layers: int
    window: int | None
    mamba_mode: MambaMode | None

    def as_group(self) -> Group:
        """This group as a case writes it."""
        return Group(
            kind=self.kind,
            block_size=self.block_size,
            window=self.window,
            mamba_mode=self.mamba_mode,
        )


@dataclass(frozen=True)
class DerivedLayout:
    """A described model's KV cache groups as the installed vLLM derives them."""

    groups: tuple[DerivedGroup, ...]
    specs: tuple[KVCacheGroupSpec, ...]  # vLLM's groups, as the engine hands them over
    layers: dict[str, KVCacheSpec]  # each layer's spec, as the workers report them at start-up
    attention_block_size: int  # the engine's cache_config.block_size after alignment


Grouping = Callable[[VllmConfig, dict[str, KVCacheSpec]], list[KVCacheGroupSpec]]


def _grouping() -> Grouping:
    """The engine's grouping call: ``get_global_kv_cache_groups`` (all workers' specs, 0.33),
    else ``get_kv_cache_groups`` (in kv_cache_utils before 0.33)."""
    for module_name in ("vllm.v1.core.kv_cache_planning", "vllm.v1.core.kv_cache_utils"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        whole = getattr(module, "get_global_kv_cache_groups", None)
        if whole is not None:
            return lambda engine, specs: list(whole(engine, [specs]))
        one = getattr(module, "get_kv_cache_groups", None)
        if one is not None:
            return lambda engine, specs: list(one(engine, specs))
    raise LayoutError("this vLLM has no get_kv_cache_groups")


def resolve_memory_layout(engine: VllmConfig, specs: dict[str, KVCacheSpec]) -> None:
    """0.33's engine core resolves the KV cache memory layout from the attention backend
    before grouping; earlier releases have no such step."""
    try:
        from vllm.v1.attention.backends.utils import (
            get_supported_kv_cache_layouts,
            resolve_kv_cache_layout,
        )
    except ImportError:
        return
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend

    names = [layout.name for layout in get_supported_kv_cache_layouts([FlashAttentionBackend])]
    resolve_kv_cache_layout(engine, [names], list(specs.values()))


# Subclasses first: MLAAttentionSpec and ChunkedLocalAttentionSpec are FullAttentionSpecs.
SPEC_KINDS: tuple[tuple[type[KVCacheSpec], GroupKind], ...] = (
    (MLAAttentionSpec, "mla"),
    (ChunkedLocalAttentionSpec, "chunked_local"),
    (SlidingWindowSpec, "sliding_window"),
    (MambaSpec, "mamba"),
    (FullAttentionSpec, "full"),
)


def _kind_of(spec: KVCacheSpec) -> GroupKind:
    for spec_type, kind in SPEC_KINDS:
        if isinstance(spec, spec_type):
            return kind
    raise LayoutError(f"no case group kind for vLLM's {type(spec).__name__}")


def _derived(group: KVCacheGroupSpec) -> DerivedGroup:
    spec = group.kv_cache_spec
    window = getattr(spec, "sliding_window", None) or getattr(spec, "attention_chunk_size", None)
    mode = getattr(spec, "mamba_cache_mode", None) if isinstance(spec, MambaSpec) else None
    return DerivedGroup(_kind_of(spec), spec.block_size, len(group.layer_names), window, mode)


def derive_layout(
    model: ModelDescription,
    settings: LayoutSettings,
    spec_tokens: int,
    engine: VllmConfig,
    hf_config: Any = None,
) -> DerivedLayout:
    """The groups vLLM would give ``model``; sets ``engine``'s cache block size as the engine's
    alignment would. ``hf_config`` is vLLM's own reading of a model's config.json, else the
    description's ``hf_config`` is built by transformers. Raises :class:`LayoutError` when this
    vLLM cannot derive it."""
    problem = architecture_problem(model.architecture)
    if problem is not None:
        raise LayoutError(problem)
    max_model_len = engine.model_config.max_model_len
    attention = attention_numbers(model, settings)
    mla = attention is not None and attention.mla
    try:
        device = device_layout(model, settings, mla)
    except DeviceError as error:
        raise LayoutError(str(error)) from None
    block_size = device.block_size
    kinds = model.layer_kinds()
    mamba_block, padded = max_model_len, None
    if any(kind in ("mamba", "full+mamba") for kind in kinds):
        shapes, dtypes = mamba_state(model, settings, spec_tokens, hf_config, max_model_len)
        # Without attention (pure Mamba) vLLM aligns nothing: no attention backend asks it
        # to (Platform.update_block_size_for_backend), and the cache block stays the device's.
        if attention is not None:
            mamba_page = spec_of(
                MambaSpec, shapes=shapes, dtypes=dtypes, block_size=1
            ).page_size_bytes
            per_token = attention.spec("mla" if mla else "full", 1, model).page_size_bytes
            block_size = aligned_block(per_token, mamba_page, device, mla)
            padded = block_size * per_token if block_size * per_token != mamba_page else None
        if settings.mamba_mode == "align":
            mamba_block = block_size
        # FlashInfer's GDN prefill keeps a checkpoint block, on the prefix-cache grid (the
        # Mamba block: vLLM's get_mamba_prefill_checkpoint_grid without a prefix_match_unit).
        checkpoint = device.checkpoint_alignment is not None
        mamba = spec_of(
            MambaSpec,
            shapes=shapes,
            dtypes=dtypes,
            block_size=mamba_block,
            page_size_padded=padded,
            mamba_cache_mode=settings.mamba_mode,
            num_speculative_blocks=spec_tokens,
            num_prefill_checkpoint_blocks=int(checkpoint),
            prefill_checkpoint_alignment=mamba_block if checkpoint else None,
        )
        if not checkpoint:
            # Other layers' own checkpoints: MambaMixer2's, from 0.32, on every device.
            mamba = with_layer_checkpoints(model.architecture, mamba)
    layers: dict[str, KVCacheSpec] = {}
    for index, kind in enumerate(kinds):
        if kind in ("mamba", "full+mamba"):
            layers[f"model.layers.{index}.mamba"] = mamba
        if kind not in ("mamba", "no_cache") and attention is not None:
            attention_kind: LayerKind = "full" if kind == "full+mamba" else kind
            layers[f"model.layers.{index}.attn"] = attention.spec(attention_kind, block_size, model)
    engine.cache_config.block_size = block_size
    try:
        resolve_memory_layout(engine, layers)
        reported = dict(layers)  # grouping may unify specs in place
        groups = _grouping()(engine, layers)
    except (NotImplementedError, ValueError, AssertionError) as error:
        raise LayoutError(f"vLLM cannot group {model.architecture}'s layers: {error}") from error
    return DerivedLayout(tuple(_derived(g) for g in groups), tuple(groups), reported, block_size)
