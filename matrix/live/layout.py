"""What a live engine is made of for a case, and which cases it can run: the tiny model whose
layers give the case's KV cache groups, where it is kept, and the prompts. Pure (no vLLM).

The model is a Llama-architecture config with one attention layer per KV cache group
(``layer_types``: ``full_attention`` or ``sliding_attention``, vLLM's Llama reads both) and
random weights: the engine loads it with ``load_format="dummy"``, so only its ``config.json``
is written, once per layout, outside the repository. The model only ever samples
:data:`SAMPLED_TOKEN` (``allowed_token_ids``, greedy), and every prompt ends in a run of that
token, so the ngram drafter always proposes it and the model accepts every draft: the harness's
``accept: all``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from matrix.case.format import CaseFile
from matrix.case.parts import RequestSpec

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


def live_unsupported(case: CaseFile, on_cpu: bool) -> str | None:
    """Why a live engine cannot run ``case`` (its groups resolved) as the harness does, or None."""
    kinds: list[str] = [group.kind for group in case.groups]
    other = sorted({kind for kind in kinds if kind not in LAYER_TYPES})
    if other:
        return (
            f"the live model has full and sliding-window attention layers only, not "
            f"{', '.join(other)} (a {other[0]} group needs a real model of that kind)"
        )
    sizes = sorted({group.tokens_per_block(case.max_model_len) for group in case.groups})
    if len(sizes) > 1:
        return (
            "a real engine gives every attention layer the cache's block size: groups of "
            f"{' and '.join(map(str, sizes))} tokens need layers of different page sizes"
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
    return _speculation_unsupported(case) or _events_unsupported(case)


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
    """The tiny model's ``config.json``: one attention layer per KV cache group."""
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


def live_prompt(spec: RequestSpec, prompts: dict[str, list[int]]) -> list[int]:
    """``spec``'s prompt: distinct tokens (so prefix caching shares only the prefixes a case
    asks for; ``prompts`` holds the earlier requests'), ending in a run of the sampled token
    for the ngram drafter to match."""
    length = spec.prompt_tokens()
    seed = sum(map(ord, spec.id))
    # Never the sampled token, so only the tail matches the drafter.
    prompt = [(seed * 31 + index * 17) % 1000 + BLOCK_TOKEN for index in range(length)]
    tail = min(TAIL_TOKENS, length - 1)
    prompt[length - tail :] = [SAMPLED_TOKEN] * tail
    if spec.prefix is not None:
        of = prompts.get(spec.prefix.of)
        if of is not None:
            prompt[: spec.prefix.tokens] = of[: spec.prefix.tokens]
    return prompt
