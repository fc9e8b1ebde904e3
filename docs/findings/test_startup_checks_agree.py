# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The public start-up check and the engine's own sizing must agree.

EngineCore sizes the KV cache with get_kv_cache_configs, which checks one
max_model_len request per KV cache group (groups padded to equal layer
counts). check_enough_kv_cache_memory, kept public and tested on its own,
sums max_memory_usage_bytes per layer. On a hybrid whose Mamba layers do not
fill their last group (Nemotron-Nano-9B-v2: 4 attention + 27 Mamba layers, 7
Mamba groups of 4) the per-layer sum is smaller, so the public check accepts
memory the engine refuses.
"""

import pytest
import torch

from vllm.config import ModelConfig, VllmConfig
from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec

try:  # 0.33 moved start-up planning out of kv_cache_utils
    from vllm.v1.core import kv_cache_planning as planning
except ImportError:
    from vllm.v1.core import kv_cache_utils as planning

pytestmark = pytest.mark.cpu_test

BLOCK_SIZE = 16
MAX_MODEL_LEN = 4 * BLOCK_SIZE


def _engine_accepts(vllm_config, specs, memory) -> bool:
    """What EngineCore._initialize_kv_caches does with `memory` for one worker."""
    arguments = [vllm_config, [dict(specs)], [memory]]
    if hasattr(planning, "get_global_kv_cache_groups"):
        arguments.append(planning.get_global_kv_cache_groups(vllm_config, [specs]))
    try:
        planning.get_kv_cache_configs(*arguments)
    except ValueError:
        return False
    return True


def _public_check_accepts(vllm_config, specs, memory) -> bool:
    try:
        planning.check_enough_kv_cache_memory(vllm_config, dict(specs), memory)
    except ValueError:
        return False
    return True


def test_check_enough_kv_cache_memory_agrees_with_engine_on_padded_hybrid():
    vllm_config = VllmConfig(
        model_config=ModelConfig(model="facebook/opt-125m", max_model_len=MAX_MODEL_LEN)
    )
    vllm_config.cache_config.kv_cache_layout = "LBNHC"
    vllm_config.cache_config.mamba_cache_mode = "align"
    vllm_config.scheduler_config.disable_hybrid_kv_cache_manager = False
    attention = FullAttentionSpec(
        block_size=BLOCK_SIZE, num_kv_heads=2, head_size=64, dtype=torch.float32
    )
    # Same page size as the attention layers (16 KiB), as hybrid models align it.
    mamba = MambaSpec(
        block_size=BLOCK_SIZE,
        shapes=((2, 512), (3, 32, 32)),
        dtypes=(torch.float32, torch.float32),
        mamba_cache_mode="align",
    )
    assert mamba.page_size_bytes == attention.page_size_bytes
    # Groups of two layers: one attention group, two Mamba groups (one padded).
    specs = {
        "attn.0": attention,
        "attn.1": attention,
        "mamba.0": mamba,
        "mamba.1": mamba,
        "mamba.2": mamba,
    }
    page = attention.page_size_bytes
    public = next(
        n for n in range(1, 64) if _public_check_accepts(vllm_config, specs, n * page)
    )
    engine = next(
        n for n in range(1, 64) if _engine_accepts(vllm_config, specs, n * page)
    )
    # Engine: 4 attention blocks + 2 Mamba groups x 2 state blocks + the null
    # block = 9 blocks of 2 pages. Per layer: 2 x 4 + 3 x 2 = 14 pages + 2.
    assert public == engine, (
        f"check_enough_kv_cache_memory accepts {public} pages, "
        f"the engine's get_kv_cache_configs needs {engine}"
    )
