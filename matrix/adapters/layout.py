"""A model description -> the KV cache groups the installed vLLM would give it.

Each layer's ``KVCacheSpec`` is built with vLLM's spec classes; a Mamba / linear-attention
layer's state shapes and dtypes come from the model class's own
``get_mamba_state_shape_from_config`` / ``get_mamba_state_dtype_from_config`` (after the
model's own config hook, which picks NemotronH's state dtype); the layers are grouped by vLLM's
``get_kv_cache_groups``.

Two pieces of the engine's path need a model built on a GPU (its attention layers) and are
ported here as small as they go: the KV heads per tensor-parallel rank
(``ModelConfig.get_num_kv_heads``) and the hybrid block-size alignment
(``Platform._align_hybrid_block_size``: the attention block grows, in steps of the attention
backend's kernel block, until an attention page holds a Mamba state page). The backend, and so
the block, depend on the device (``matrix.adapters.devices``). Tests hold both against vLLM's
own functions on a model where both run.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch
from vllm.config import CacheConfig, ParallelConfig, VllmConfig
from vllm.model_executor.models import ModelRegistry
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
from matrix.adapters.model_files import HfConfigError, hf_config_of
from matrix.adapters.registry import architecture_problem
from matrix.case.model import LayerKind, LayoutSettings, ModelDescription
from matrix.case.parts import Group, GroupKind, MambaMode


class LayoutError(Exception):
    """The installed vLLM cannot derive this model's layout; the message says why."""


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


def _spec(spec_type: type[KVCacheSpec], **fields: Any) -> KVCacheSpec:
    """A spec with the fields this release's class has (releases add fields over time)."""
    known = {f.name for f in dataclasses.fields(spec_type)}
    return spec_type(**{k: v for k, v in fields.items() if k in known})


def _torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, {"fp8": "float8_e4m3fn"}.get(name, name))
    assert isinstance(dtype, torch.dtype)
    return dtype


@dataclass(frozen=True)
class _Attention:
    """One attention layer's numbers on one tensor-parallel rank."""

    num_kv_heads: int
    head_size: int
    dtype: torch.dtype
    mla: bool

    def spec(self, kind: LayerKind, block_size: int, model: ModelDescription) -> KVCacheSpec:
        common = {
            "block_size": block_size,
            "num_kv_heads": self.num_kv_heads,
            "head_size": self.head_size,
            "dtype": self.dtype,
        }
        if kind == "mla":
            return _spec(MLAAttentionSpec, **common)
        if kind == "sliding_window":
            return _spec(SlidingWindowSpec, sliding_window=model.sliding_window, **common)
        if kind == "chunked_local":
            chunk = model.attention_chunk_size
            return _spec(ChunkedLocalAttentionSpec, attention_chunk_size=chunk, **common)
        return _spec(FullAttentionSpec, **common)


def _attention(model: ModelDescription, settings: LayoutSettings) -> _Attention | None:
    """The attention layers' numbers on one rank; None for a model without attention (pure
    Mamba)."""
    if set(model.layer_kinds()) <= {"mamba", "no_cache"}:
        return None
    dtype = _torch_dtype(model.dtype if settings.kv_cache_dtype == "auto" else "fp8")
    if model.mla is not None and model.num_kv_heads is None:
        # MLA caches one latent per token, shared by all heads, on every rank.
        return _Attention(1, model.mla.kv_lora_rank + model.mla.qk_rope_head_dim, dtype, True)
    assert model.num_kv_heads is not None and model.head_size is not None
    # ModelConfig.get_num_kv_heads: heads split over ranks, replicated when fewer than ranks.
    return _Attention(max(1, model.num_kv_heads // settings.tp), model.head_size, dtype, False)


def _mamba_state(
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
            dtype=_torch_dtype(model.dtype),
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
    attention = _attention(model, settings)
    mla = attention is not None and attention.mla
    try:
        device = device_layout(model, settings, mla)
    except DeviceError as error:
        raise LayoutError(str(error)) from None
    block_size = device.block_size
    kinds = model.layer_kinds()
    mamba_block, padded = max_model_len, None
    if any(kind in ("mamba", "full+mamba") for kind in kinds):
        shapes, dtypes = _mamba_state(model, settings, spec_tokens, hf_config, max_model_len)
        # Without attention (pure Mamba) vLLM aligns nothing: no attention backend asks it
        # to (Platform.update_block_size_for_backend), and the cache block stays the device's.
        if attention is not None:
            mamba_page = _spec(
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
        mamba = _spec(
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
