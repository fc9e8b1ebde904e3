"""What a model's Mamba layer class makes of its state spec, asked of vLLM's own layer code.

Each Mamba-like layer reports its ``MambaSpec`` through ``get_kv_cache_spec``, and some layer
classes change the base spec there: from 0.32 ``MambaMixer2`` (Nemotron-H, Falcon-H1,
Granite-4.0-H, Zamba2, Mamba2...) keeps one prefill checkpoint block, on every device. Which
class a model's Mamba layers are is read from the model class's module (the ``MambaBase``
subclasses it names: vLLM builds its layers from them), without building the model; the
class's own ``get_kv_cache_spec`` then runs on a bare instance that answers the state shapes
and dtypes, so the fields come from vLLM's code, per release.

A layer whose override reads what the built layer chose (its kernels: FlashInfer's GDN
prefill, FlashKDA) fails on the bare instance with ``AttributeError``; those checkpoints turn on
the device, which ``matrix.adapters.devices`` profiles, so nothing is taken from such a class.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from types import SimpleNamespace
from typing import Any

from vllm.config import CacheConfig
from vllm.model_executor.layers.mamba.abstract import MambaBase
from vllm.model_executor.models import ModelRegistry
from vllm.v1.kv_cache_interface import MambaSpec

from matrix.adapters.layer_specs import LayoutError

CHECKPOINT_FIELDS = ("num_prefill_checkpoint_blocks", "prefill_checkpoint_alignment")


def layer_classes(architecture: str) -> tuple[type[MambaBase], ...]:
    """The Mamba layer classes ``architecture``'s model module names (defined or imported)."""
    model_class = ModelRegistry.models[architecture].load_model_cls()
    module = sys.modules[model_class.__module__]
    found = {
        value
        for value in vars(module).values()
        if inspect.isclass(value) and issubclass(value, MambaBase) and value is not MambaBase
    }
    return tuple(sorted(found, key=lambda cls: cls.__qualname__))


def _layer_spec(layer_class: type[MambaBase], base: MambaSpec) -> MambaSpec | None:
    """``layer_class.get_kv_cache_spec`` for a layer with ``base``'s state and settings; None
    where it reads what a built layer chose."""
    layer: Any = object.__new__(layer_class)  # no __init__: it builds weights and kernels
    layer.__dict__.update(
        get_state_shape=lambda: base.shapes,
        get_state_dtype=lambda: base.dtypes,
        state_alignment=getattr(base, "state_alignment", 1),
    )
    cache = CacheConfig(mamba_cache_mode=base.mamba_cache_mode)
    cache.mamba_block_size = base.block_size
    cache.mamba_page_size_padded = base.page_size_padded
    engine = SimpleNamespace(cache_config=cache, num_speculative_tokens=base.num_speculative_blocks)
    try:
        spec = layer.get_kv_cache_spec(engine)
    except AttributeError:
        return None
    return spec if isinstance(spec, MambaSpec) else None


def with_layer_checkpoints(architecture: str, base: MambaSpec) -> MambaSpec:
    """``base`` with the prefill checkpoint fields ``architecture``'s Mamba layer class gives
    it on this release (unchanged where the release's spec has no such fields, or the class
    leaves them to the device). Raises :class:`LayoutError` where its classes disagree."""
    known = {field.name for field in dataclasses.fields(MambaSpec)}
    if not set(CHECKPOINT_FIELDS) <= known:
        return base
    answers = {
        tuple(getattr(spec, name) for name in CHECKPOINT_FIELDS)
        for spec in (_layer_spec(cls, base) for cls in layer_classes(architecture))
        if spec is not None
    }
    if not answers:
        return base
    if len(answers) > 1:
        raise LayoutError(
            f"{architecture}'s Mamba layer classes give different prefill checkpoints "
            f"({sorted(answers, key=str)}): which layers are which is not modelled"
        )
    return dataclasses.replace(base, **dict(zip(CHECKPOINT_FIELDS, answers.pop(), strict=True)))
