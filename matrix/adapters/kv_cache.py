"""A case -> the KV cache layout the engine would hand its scheduler (``KVCacheConfig``: the
groups and the pool; no tensors, the scheduler only counts blocks).

A case's groups are written out (:func:`group_spec` turns each into vLLM's spec class, with
tiny heads: only block counts matter), or derived from a model description by ``layout``
(vLLM's own per-layer specs and grouping, real page sizes); :func:`with_layout` fills a
described case's groups from its derived layout, so the rest of the matrix reads them alike.
"""

from __future__ import annotations

from typing import Any

import torch
from vllm.v1.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
)

from matrix.adapters.config import (
    EngineSettings,
    build_vllm_config,
    cache_block_size,
    engine_settings,
    vllm_config_for,
)
from matrix.adapters.layout import DerivedLayout, LayoutError, derive_layout
from matrix.case.config_json import ConfigModel
from matrix.case.format import CaseFile
from matrix.case.model import LayoutSettings, ModelDescription, PromptInBlocks
from matrix.case.parts import Group


def group_spec(group: Group, max_model_len: int, spec_tokens: int) -> KVCacheSpec:
    """One case group as vLLM's spec (tiny heads: only block counts matter)."""
    block_size = group.tokens_per_block(max_model_len)
    attention = {"num_kv_heads": 2, "head_size": 16, "dtype": torch.float32}
    if group.kind == "full":
        return FullAttentionSpec(block_size=block_size, **attention)
    if group.kind == "sliding_window" and group.bounded_replay:
        return SlidingWindowMLASpec(
            block_size=block_size, sliding_window=group.window, bounded_replay=True, **attention
        )
    if group.kind == "sliding_window":
        return SlidingWindowSpec(block_size=block_size, sliding_window=group.window, **attention)
    if group.kind == "chunked_local":
        chunk = group.window
        return ChunkedLocalAttentionSpec(
            block_size=block_size, attention_chunk_size=chunk, **attention
        )
    if group.kind == "mla":
        return MLAAttentionSpec(block_size=block_size, **attention)
    # A Mamba layer's two states, conv and SSM (MoRIIO's hybrid transfer checks there are two).
    checkpoint = (
        {"num_prefill_checkpoint_blocks": 1, "prefill_checkpoint_alignment": 1}
        if group.prefill_checkpoint
        else {}
    )
    return MambaSpec(
        block_size=block_size,
        shapes=((16,), (16,)),
        dtypes=(torch.float32, torch.float32),
        mamba_cache_mode=group.mamba_mode,
        num_speculative_blocks=spec_tokens,
        **checkpoint,
    )


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
        model, hf_config = described_model(case)
        # A fresh config: the derivation sets its block size as the engine's alignment would.
        derived = derive_layout(
            model, case.layout, _spec_tokens(case), build_vllm_config(engine), hf_config
        )
        _layouts[key] = derived
    return _layouts[key]


def described_model(case: CaseFile) -> tuple[ModelDescription, Any]:
    """A model case's numbers (a config.json read by vLLM, or a description) and the config
    object vLLM read (None for a description); raises ``layout.LayoutError``."""
    assert case.described is not None
    if not isinstance(case.described, ConfigModel):
        return case.described, None
    from matrix.adapters.config_json import ConfigJsonError, check_max_model_len, description

    try:
        model, hf_config = description(case.described)
        refused = check_max_model_len(case.described, case.max_model_len)
    except ConfigJsonError as error:
        raise LayoutError(str(error)) from None
    if refused is not None:
        raise LayoutError(f"max_model_len: {refused}")
    return model, hf_config


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
    block_size = cache_block_size(case)
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
            stored = request.stored
            if stored is not None and stored.tokens > tokens:  # the file's check, in tokens
                raise ValueError(
                    f"request {request.id}: the tier holds {stored.tokens} tokens of a "
                    f"{tokens}-token prompt (blocks of {block_size})"
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
