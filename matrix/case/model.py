"""What a model description (``cases/models/<slug>.yaml``) and a case's model settings may say
(which file a case's ``model:`` names is ``matrix.case.model_paths``).

A model description holds the numbers a model's KV cache depends on, in the words of its public
``config.json``; ``matrix.adapters.layout`` turns them into KV cache groups with vLLM's own code.
Pure: no vLLM here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from matrix.case.limits import MAX_HEAD_SIZE, MAX_HEADS, MAX_LAYERS
from matrix.case.model_rules import check_description
from matrix.case.strict import Strict

# One layer's KV cache: attention of a kind, a Mamba / linear-attention state, or both in
# parallel (Falcon-H1 runs attention and Mamba side by side in every layer), or none (an MLP
# layer of a hybrid: NemotronH counts them as layers).
LayerKind = Literal[
    "full", "sliding_window", "chunked_local", "mla", "mamba", "full+mamba", "no_cache"
]
Positive = Annotated[int, Field(gt=0)]
# The devices a layout can be derived for (matrix/adapters/devices.py has what each gives).
Device = Literal["sm80", "sm90", "sm100", "cpu"]


class MlaRanks(Strict):
    """Multi-head latent attention: one latent of ``kv_lora_rank + qk_rope_head_dim`` per token."""

    kv_lora_rank: Positive
    qk_rope_head_dim: Positive


class ModelDescription(Strict):
    """A real model's KV cache numbers and where they come from."""

    source: Annotated[str, Field(min_length=1)]  # the public config.json the numbers are from
    architecture: Annotated[str, Field(pattern=r"^[A-Za-z0-9_]+$")]  # as vLLM's registry knows it
    dtype: Literal["bfloat16", "float16", "float32"]
    num_layers: Annotated[int, Field(gt=0, le=MAX_LAYERS)]
    # The kinds of consecutive layers, repeated until num_layers (layer i is pattern[i % len]).
    layer_pattern: Annotated[list[LayerKind], Field(min_length=1, max_length=MAX_LAYERS)]
    num_kv_heads: Annotated[int, Field(gt=0, le=MAX_HEADS)] | None = None
    head_size: Annotated[int, Field(gt=0, le=MAX_HEAD_SIZE)] | None = None
    sliding_window: Positive | None = None
    attention_chunk_size: Positive | None = None
    mla: MlaRanks | None = None
    # config.json's keys, model_type first: what a Mamba model class's own
    # get_mamba_state_shape_from_config reads (vLLM derives the state from them), and any key a
    # number above is copied from, so that the two are compared (matrix/case/model_rules.py)
    # and transformers' config class checks them (matrix/adapters/model_files.py).
    hf_config: dict[str, Any] = {}

    def layer_kinds(self) -> tuple[LayerKind, ...]:
        """Every layer's kind, in order: ``layer_pattern`` repeated to ``num_layers``."""
        return tuple(
            self.layer_pattern[i % len(self.layer_pattern)] for i in range(self.num_layers)
        )

    @model_validator(mode="after")
    def _numbers_for_kinds(self) -> ModelDescription:
        check_description(self)
        return self


class LayoutSettings(Strict):
    """The engine settings a described model's layout depends on (besides speculative decoding
    and max_model_len, which are the case's own)."""

    tp: Annotated[int, Field(ge=1, le=64)] = 1  # tensor-parallel size
    # "none" is vLLM's default (no Mamba prefix caching); "align" caches a state per block.
    mamba_mode: Literal["none", "align"] = "none"
    block_size: Annotated[int, Field(gt=0, le=4096)] | None = None  # the user's --block-size
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    # The device vLLM runs on: it picks the attention backend, whose kernel blocks set the
    # cache block (matrix/adapters/devices.py). sm80 is FlashAttention's kernel block of 16.
    device: Device = "sm80"
    # Overrides the device's attention backend's smallest kernel block (its alignment).
    kernel_block_size: Annotated[int, Field(gt=0, le=1024)] | None = None


class FitSweep(Strict):
    """Pool sizes from ``below`` blocks under the case's fit to ``above`` blocks over it: a
    described model's fit scales with its layout (a 7-group model needs larger pools)."""

    below: Annotated[int, Field(ge=0, le=64)]
    above: Annotated[int, Field(ge=0, le=64)]


def pool_kind(value: Any) -> str:
    """Which form a ``pool:`` takes (blocks, a sweep, a sweep around the fit), so a mistake is
    reported against that form alone."""
    if isinstance(value, FitSweep) or (
        isinstance(value, dict) and value.keys() & {"below", "above"}
    ):
        return "fit"
    if type(value).__name__ == "StartableSweep" or (
        isinstance(value, dict) and "above_startable" in value
    ):
        return "startable"
    return "sweep" if isinstance(value, dict | BaseModel) else "blocks"


class PromptInBlocks(Strict):
    """A prompt length in the cache's (attention) blocks, ``blocks`` whole blocks plus
    ``offset`` tokens: one token past a boundary or one short of it, whatever block size the
    layout derives."""

    blocks: Annotated[int, Field(ge=1, le=64)]
    offset: Annotated[int, Field(ge=-64, le=64)] = 0
