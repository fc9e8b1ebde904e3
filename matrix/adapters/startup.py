"""A case -> the smallest KV pool vLLM starts an engine with for the case's requests.

An engine starts only when its start-up check (in ``get_kv_cache_configs``: the groups'
``max_memory_usage_bytes`` for one request of ``max_model_len``, padded to equal groups, plus
the null block the pool holds back) accepts the memory it has; it then makes
``memory // bytes per block`` blocks. The engine serving a case is sized for the case's
longest request: ``max_model_len`` is that request's prompt and output tokens plus the
speculative ones.

A described model runs the release's own path (``get_kv_cache_configs``, what ``EngineCore``
calls, on the per-layer specs the workers would report) at the least memory it accepts. A
case's written groups stand for layers of equal page size, one layer per group, as a real
hybrid engine's groups are; there the same rule reads per group: each spec's
``max_memory_usage_bytes`` in its own pages, summed, plus the null block.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Any

from vllm.config import VllmConfig
from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheGroupSpec, KVCacheSpec

from matrix.adapters.config import build_vllm_config, engine_settings, vllm_config_for
from matrix.adapters.kv_cache import group_spec, layout_for, with_layout
from matrix.adapters.layout import LayoutError, resolve_memory_layout
from matrix.adapters.protocol import Startable
from matrix.case.format import CaseFile

NULL_BLOCKS = 1  # the block every release's BlockPool holds back, which the check reserves


_startable: dict[str, Startable] = {}


def startable(case: CaseFile) -> Startable:
    """The smallest pool the installed release starts an engine with for ``case``, or why
    none can be computed (once per run key: cells of a case share it)."""
    key = case.run_key(without=frozenset({"pool"}))
    if key not in _startable:
        _startable[key] = _startable_of(case)
    return _startable[key]


def _startable_of(case: CaseFile) -> Startable:
    try:
        sized = with_layout(case).served()
    except LayoutError as error:
        return Startable(None, f"no layout: {error}")
    if sized.described is None:
        config = vllm_config_for(sized, 2)
        spec_tokens = sized.speculative.num_tokens if sized.speculative else 0
        specs = [group_spec(g, sized.max_model_len, spec_tokens) for g in sized.groups]
        blocks = sum(-(-s.max_memory_usage_bytes(config) // s.page_size_bytes) for s in specs)
        return Startable(
            blocks + NULL_BLOCKS,
            f"max_model_len {sized.max_model_len}: each group one layer of equal page size",
        )
    try:
        layout = layout_for(sized)
    except LayoutError as error:
        return Startable(None, f"no layout at max_model_len {sized.max_model_len}: {error}")
    layers = layout.layers
    # The engine's config as the derivation leaves it: its block size aligned, its memory
    # layout resolved (0.33 sizes pools by it).
    config = build_vllm_config(engine_settings(with_layout(sized)))
    config.cache_config.block_size = layout.attention_block_size
    try:
        resolve_memory_layout(config, dict(layers))
        blocks = _least_accepted_pool(config, layers)
    except (ValueError, AssertionError, NotImplementedError) as error:
        return Startable(None, f"vLLM's start-up sizing failed: {error}")
    return Startable(blocks, f"max_model_len {sized.max_model_len}: vLLM's get_kv_cache_configs")


def _least_accepted_pool(config: VllmConfig, layers: dict[str, KVCacheSpec]) -> int:
    """The fewest blocks ``get_kv_cache_configs`` makes from any memory its check accepts.

    Any memory giving ``n`` blocks lies below ``(n + 1)`` blocks' bytes, and the check is
    monotone in memory, so ``n`` is startable exactly when ``(n + 1)`` blocks' bytes less one
    is accepted. Every release's check asks at least the layers' summed maximum and a block,
    which bounds the answer from below; the search walks up from there."""
    sizing = _Sizing.of_release()
    needed = int(sum(spec.max_memory_usage_bytes(config) for spec in layers.values()))
    generous = 2 * (needed + sum(spec.page_size_bytes for spec in layers.values()))
    ample = sizing.config_at(config, layers, generous)
    if ample is None:
        raise ValueError(f"{generous} bytes, twice every layer's maximum and a block, refused")
    per_block = sizing.bytes_per_block(config, list(ample.kv_cache_groups))

    def starts_with(pool: int) -> bool:
        return sizing.config_at(config, layers, (pool + 1) * per_block - 1) is not None

    refused = needed // per_block  # this pool's most memory is below what the check asks
    started = int(ample.num_blocks)
    step = 1
    while refused + step < started and not starts_with(refused + step):
        refused, step = refused + step, step * 2
    started = min(started, refused + step)
    while started - refused > 1:
        middle = (started + refused) // 2
        refused, started = (refused, middle) if starts_with(middle) else (middle, started)
    return started


@dataclass(frozen=True)
class _Sizing:
    """The release's start-up sizing: ``get_kv_cache_configs`` for one worker and the bytes
    a block of its pool takes (the divisor it turns memory into blocks with). 0.33 moved both
    to ``kv_cache_planning``, takes the global groups as an argument and sizes blocks through
    its config builder; 0.32 added the config to the divisor's arguments."""

    module: Any

    @classmethod
    def of_release(cls) -> _Sizing:
        for name in ("vllm.v1.core.kv_cache_planning", "vllm.v1.core.kv_cache_utils"):
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            if hasattr(module, "get_kv_cache_configs"):
                return cls(module)
        raise LayoutError("this vLLM has no get_kv_cache_configs")

    def config_at(
        self, config: VllmConfig, layers: dict[str, KVCacheSpec], memory: int
    ) -> KVCacheConfig | None:
        """The engine's KV cache config at ``memory`` bytes, or None where its check refuses."""
        configs = self.module.get_kv_cache_configs
        arguments: list[Any] = [config, [dict(layers)], [memory]]
        if "global_kv_cache_groups" in inspect.signature(configs).parameters:
            arguments.append(list(self.module.get_global_kv_cache_groups(config, [dict(layers)])))
        # A refusal's message estimates the longest request that would fit, by a search that
        # costs more than the sizing; only the message reads it.
        estimate = "_estimate_max_model_len_from_groups"
        saved = getattr(self.module, estimate, None)
        if saved is not None:
            setattr(self.module, estimate, lambda *_: 0)
        try:
            return configs(*arguments)[0]
        except ValueError as error:
            if "memory" not in str(error):
                raise
            return None
        finally:
            if saved is not None:
                setattr(self.module, estimate, saved)

    def bytes_per_block(self, config: VllmConfig, groups: list[KVCacheGroupSpec]) -> int:
        """What one block of the engine's pool takes, as the release divides memory by."""
        from_builder = getattr(self.module, "_pool_bytes_per_block_from_builder", None)
        if from_builder is not None:
            from vllm.v1.core.kv_cache_config_builder import get_kv_cache_config_builder

            return int(from_builder(get_kv_cache_config_builder(config), config, groups))
        divisor = self.module._pool_bytes_per_block
        if len(inspect.signature(divisor).parameters) == 2:
            return int(divisor(config, groups))
        return int(divisor(groups))
