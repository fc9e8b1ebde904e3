"""What a live engine is made of for a case, and which cases it can run: the tiny model whose
layers give the case's KV cache groups, where it is kept, and the prompts. Pure (no vLLM).

The model has random weights: the engine loads it with ``load_format="dummy"``, so only its
``config.json`` is written, once per layout, outside the repository.

- **Attention only**: a Llama-architecture config with one attention layer per KV cache group
  (``layer_types``: ``full_attention`` or ``sliding_attention``; vLLM's Llama reads both).
- **With Mamba groups**: a NemotronH config (the family of Nemotron-Nano-9B-v2; Mamba2 layers,
  as in Granite-4.0-H, Falcon-H1 and Zamba2), one Mamba2 layer per Mamba group and one
  attention layer (``hybrid_override_pattern`` ``M...M*``): vLLM puts each Mamba layer in a
  group of its own beside the attention group. Its state is small enough for a 32-token
  attention block, so the engine keeps the case's block size in ``align`` mode.

The model only ever samples :data:`SAMPLED_TOKEN` (``allowed_token_ids``, greedy), and every
prompt ends in a run of that token, so the ngram drafter always proposes it and the model
accepts every draft: the harness's ``accept: all``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from matrix.case.format import CaseFile

# The one token the live model samples, and the run of it that ends every prompt; the other
# prompt tokens start above it.
SAMPLED_TOKEN = 7
TAIL_TOKENS = 32
BLOCK_TOKEN = 8
# vLLM's CPU attention runs blocks of a multiple of 32 tokens (measured: 0.31 runs an 8- or
# 16-token block size as 32) and needs a head size it has kernels for (64 works, 16 does not).
CPU_BLOCK_MULTIPLE = 32
HEAD_SIZE = 64
LAYER_TYPES = {"full": "full_attention", "sliding_window": "sliding_attention"}
# The Mamba block a real engine gives each mode: the whole sequence without prefix caching,
# the attention block with it.
MAMBA_BLOCK = {"none": "max_model_len", "align": "the attention block"}
# The live hybrid's Mamba2 chunk: a prefill is scanned in chunks of this many tokens.
MAMBA_CHUNK = 32


def live_unsupported(case: CaseFile, on_cpu: bool) -> str | None:
    """Why a live engine cannot run ``case`` (its groups resolved) as the harness does, or None."""
    kinds: list[str] = [group.kind for group in case.groups]
    other = sorted({kind for kind in kinds if kind not in LAYER_TYPES and kind != "mamba"})
    if other:
        return (
            f"the live model has full and sliding-window attention and Mamba2 layers only, not "
            f"{', '.join(other)} (a {other[0]} group needs a real model of that kind)"
        )
    attention = [group for group in case.groups if group.kind != "mamba"]
    sizes = sorted({group.tokens_per_block(case.max_model_len) for group in attention})
    if len(sizes) != 1:
        return (
            "a real engine gives every attention layer the cache's block size: groups of "
            f"{' and '.join(map(str, sizes))} tokens need layers of different page sizes"
            if sizes
            else "the live model needs an attention layer beside its Mamba layers"
        )
    for kind in LAYER_TYPES:
        if kinds.count(kind) > 1:
            return (
                f"a real engine puts layers of one kind in one KV cache group: the case's "
                f"{kinds.count(kind)} {kind} groups would be one"
            )
    if on_cpu and sizes[0] % CPU_BLOCK_MULTIPLE:
        return (
            f"vLLM's CPU attention runs blocks of a multiple of {CPU_BLOCK_MULTIPLE} tokens, "
            f"not {sizes[0]}"
        )
    return (
        _mamba_unsupported(case, sizes[0])
        or _speculation_unsupported(case)
        or _events_unsupported(case)
    )


def _mamba_unsupported(case: CaseFile, block_size: int) -> str | None:
    mamba = [group for group in case.groups if group.kind == "mamba"]
    if not mamba:
        return None
    if any(group.kind == "sliding_window" for group in case.groups):
        return "the live hybrid (NemotronH) has full attention beside its Mamba layers"
    mode = mamba[0].mamba_mode
    if mode not in MAMBA_BLOCK:
        return f"the live mode runs Mamba in modes none and align, not {mode}"
    expected = case.max_model_len if mode == "none" else block_size
    wrong = sorted({g.tokens_per_block(case.max_model_len) for g in mamba} - {expected})
    if wrong:
        return (
            f"a real engine gives a Mamba group in mode {mode} blocks of {MAMBA_BLOCK[mode]} "
            f"({expected} tokens), not {wrong[0]}"
        )
    return None


def _speculation_unsupported(case: CaseFile) -> str | None:
    speculative = case.speculative
    if speculative is None:
        return None
    if speculative.method != "ngram":
        return (
            f"the live engine drafts with ngram only: an {speculative.method} draft model adds "
            "its own layers (a KV cache group) and proposes tokens a random model rejects"
        )
    if speculative.accept != "all":
        return (
            "the live model accepts every draft (it samples the drafted token only); "
            f"accept: {speculative.accept} is the harness's alone"
        )
    return None


def _events_unsupported(case: CaseFile) -> str | None:
    if any(getattr(event, "fail_load", None) for event in case.events):
        return "the live connector reports loads finished, never failed (fail_load)"
    return None


def model_config(case: CaseFile) -> dict[str, Any]:
    """The tiny model's ``config.json``: one layer per KV cache group (see the docstring)."""
    if any(group.kind == "mamba" for group in case.groups):
        return _hybrid_config(case)
    windows = [group.window for group in case.groups if group.kind == "sliding_window"]
    config: dict[str, Any] = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        # One head of the size CPU attention needs: the smallest matrices a forward pass can
        # have, since forward passes are most of a live run's time.
        "hidden_size": HEAD_SIZE,
        "intermediate_size": 2 * HEAD_SIZE,
        "num_attention_heads": 1,
        "num_key_value_heads": 1,
        "head_dim": HEAD_SIZE,
        "num_hidden_layers": len(case.groups),
        "layer_types": [LAYER_TYPES[group.kind] for group in case.groups],
        "vocab_size": 1024,
        "max_position_embeddings": max(4096, case.max_model_len),
        "rms_norm_eps": 1e-6,
        "torch_dtype": "float32",
        "tie_word_embeddings": False,
    }
    if windows:
        config["sliding_window"] = windows[0]
    return config


def _hybrid_config(case: CaseFile) -> dict[str, Any]:
    """NemotronH: a Mamba2 layer per Mamba group, then one attention layer."""
    pattern = "M" * sum(group.kind == "mamba" for group in case.groups) + "*"
    return {
        "architectures": ["NemotronHForCausalLM"],
        "model_type": "nemotron_h",
        "hidden_size": HEAD_SIZE,
        "intermediate_size": 2 * HEAD_SIZE,
        "num_hidden_layers": len(pattern),
        "hybrid_override_pattern": pattern,
        "num_attention_heads": 1,
        "num_key_value_heads": 1,
        "head_dim": HEAD_SIZE,
        # A Mamba2 state of 2 heads of 32 x 16 and a 4-wide convolution: a page of fewer
        # attention tokens than one 32-token block holds, in float32 or bfloat16.
        "mamba_num_heads": 2,
        "mamba_head_dim": 32,
        "n_groups": 1,
        "ssm_state_size": 16,
        "conv_kernel": 4,
        "expand": 1,
        "chunk_size": MAMBA_CHUNK,
        "vocab_size": 1024,
        "max_position_embeddings": max(4096, case.max_model_len),
        "layer_norm_epsilon": 1e-5,
        "torch_dtype": "float32",
        "tie_word_embeddings": False,
    }


def models_root() -> Path:
    """Where the live models' configs are kept: outside the repository, beside vLLM's cache
    root of the tox envs (``MATRIX_VLLM_CACHE``, default ``~/.cache/vllm-kv-matrix``)."""
    base = os.environ.get("MATRIX_VLLM_CACHE") or str(Path.home() / ".cache" / "vllm-kv-matrix")
    return Path(base) / "live-models"


def model_dir(case: CaseFile, root: Path | None = None) -> Path:
    """The directory of ``case``'s live model, its ``config.json`` written once (atomically)."""
    text = json.dumps(model_config(case), indent=2, sort_keys=True) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    directory = (root or models_root()) / digest
    config = directory / "config.json"
    if not config.is_file():
        directory.mkdir(parents=True, exist_ok=True)
        partial = directory / f"config.json.{os.getpid()}"
        partial.write_text(text)
        partial.replace(config)
    return directory


def live_tokens(request_id: str, length: int) -> list[int]:
    """A request's own prompt on the live engine: distinct tokens (so prefix caching shares
    only the prefixes a case asks for), ending in a run of the sampled token for the ngram
    drafter to match."""
    seed = sum(map(ord, request_id))
    # Never the sampled token, so only the tail matches the drafter.
    prompt = [(seed * 31 + index * 17) % 1000 + BLOCK_TOKEN for index in range(length)]
    tail = min(TAIL_TOKENS, length - 1)
    prompt[length - tail :] = [SAMPLED_TOKEN] * tail
    return prompt
