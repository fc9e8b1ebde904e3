"""The numbers of a model's config that vLLM allocates or divides by (a config.json's text
model, a description's ``hf_config``), checked before vLLM reads them, so that a careless one
is a line at its key rather than a traceback, a ``ZeroDivisionError`` in one line, or a billion
layer objects: each is a whole number, at least one and within matrix/case/limits.py, and the
KV heads are at most the attention heads and divide them (vLLM's attention layer refuses
anything else); the lengths vLLM derives ``max_model_len`` from are at least one, so that such
a key is named rather than ``max_model_len``. Pure: no vLLM here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matrix.case.limits import MAX_HEAD_SIZE, MAX_HEADS, MAX_LAYERS

LAYERS = "vLLM builds an object per layer"
DIVIDES = "vLLM divides by it"
# config.json's key -> the most it may be (None: no bound but one), and why. The layer counts
# under each name transformers maps to num_hidden_layers.
COUNTS: dict[str, tuple[int | None, str]] = {
    "num_hidden_layers": (MAX_LAYERS, LAYERS),
    "num_layers": (MAX_LAYERS, LAYERS),
    "n_layer": (MAX_LAYERS, LAYERS),
    "n_layers": (MAX_LAYERS, LAYERS),
    "num_attention_heads": (MAX_HEADS, DIVIDES),
    "n_head": (MAX_HEADS, DIVIDES),
    "num_key_value_heads": (MAX_HEADS, DIVIDES),
    "head_dim": (MAX_HEAD_SIZE, DIVIDES),
    "hidden_size": (None, "vLLM divides it by num_attention_heads"),
}


def _count_problem(value: Any, most: int | None, why: str) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{value!r} is not a whole number"
    if value < 1:
        return f"{value}: at least 1 ({why})"
    if most is not None and value > most:
        return f"{value:,} is over the limit of {most:,} ({why})"
    return None


def heads_problem(kv_heads: int, heads: int) -> str | None:
    """Why vLLM's attention refuses ``kv_heads`` KV heads for ``heads`` attention heads (more
    KV heads than heads, or a number that does not divide them), or None."""
    if kv_heads > heads:
        return f"{kv_heads} KV heads, more than num_attention_heads {heads}: vLLM refuses it"
    if heads % kv_heads:
        return (
            f"{kv_heads} KV heads do not divide num_attention_heads {heads} (each serves the "
            "same number of query heads): vLLM refuses it"
        )
    return None


# The keys vLLM derives a model's longest context from, the smallest it finds (vLLM's
# ModelArchConfigConvertor.derive_max_model_len_and_key): one below 1 makes vLLM refuse the
# model as a max_model_len "must be a positive integer", naming no key of the file.
LENGTH_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)


def number_problem(config: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first key of ``config`` (a config.json's keys) whose number vLLM cannot build a
    model from, and why; None when every one it states is fine."""
    for key, (most, why) in COUNTS.items():
        value = config.get(key)
        problem = None if value is None else _count_problem(value, most, why)
        if problem is not None:
            return key, problem
    for key in LENGTH_KEYS:
        value = config.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 1:
            return key, f"{value}: at least 1 (vLLM derives the model's max_model_len from it)"
    heads, kv_heads = config.get("num_attention_heads"), config.get("num_key_value_heads")
    if heads is not None and kv_heads is not None:
        problem = heads_problem(kv_heads, heads)
        if problem is not None:
            return "num_key_value_heads", problem
    return None
