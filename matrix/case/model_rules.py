"""The rules a model description must keep that span its keys: each layer kind has its numbers,
``hf_config``'s numbers are ones vLLM can build (``matrix.case.config_numbers``), a number
stated twice (once as a key, once in ``hf_config`` as config.json has it) agrees, and the
layers add up. Each rule raises :class:`PlacedError` at the key a user would fix, in
the words of a model file. Pure: transformers' and vLLM's view of a file is
``matrix.adapters.model_files``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from matrix.case.config_numbers import heads_problem, number_problem
from matrix.case.strict import PlacedError


class _Described(Protocol):
    """What the rules read of a model description (``matrix.case.model.ModelDescription``)."""

    @property
    def num_layers(self) -> int: ...
    @property
    def layer_pattern(self) -> Sequence[str]: ...
    @property
    def num_kv_heads(self) -> int | None: ...
    @property
    def head_size(self) -> int | None: ...
    @property
    def sliding_window(self) -> int | None: ...
    @property
    def attention_chunk_size(self) -> int | None: ...
    @property
    def mla(self) -> object: ...
    @property
    def hf_config(self) -> dict[str, Any]: ...

    def layer_kinds(self) -> Sequence[str]:
        """Every layer's kind, in order."""
        ...


# A layer kind -> the key holding its numbers, and where config.json has them.
KIND_NUMBERS = {
    "sliding_window": ("sliding_window", "config.json's sliding_window"),
    "chunked_local": ("attention_chunk_size", "config.json's attention_chunk_size"),
    "mla": ("mla", "config.json's kv_lora_rank and qk_rope_head_dim"),
}

# A key of the description -> the config.json keys that state the same number.
STATED_TWICE: dict[tuple[str, ...], tuple[str, ...]] = {
    ("num_layers",): ("num_hidden_layers",),
    ("num_kv_heads",): ("num_key_value_heads",),
    ("head_size",): ("head_dim", "attention_head_dim"),
    ("sliding_window",): ("sliding_window",),
    ("attention_chunk_size",): ("attention_chunk_size",),
    ("mla", "kv_lora_rank"): ("kv_lora_rank",),
    ("mla", "qk_rope_head_dim"): ("qk_rope_head_dim",),
    ("dtype",): ("torch_dtype", "dtype"),
}

# config.json keys that list every layer (their length is the number of layers).
LAYER_LISTS = ("layer_types", "layers_block_type", "hybrid_override_pattern")


def check_description(model: _Described) -> None:
    """Raises :class:`PlacedError` at the first rule ``model`` breaks."""
    _numbers_for_kinds(model)
    _hf_config_needed(model)
    _hf_numbers(model)
    _stated_twice(model)
    _layer_counts(model)


def _hf_numbers(model: _Described) -> None:
    """hf_config's numbers as a config.json's are checked, and the description's KV heads
    against hf_config's attention heads."""
    problem = number_problem(model.hf_config)
    if problem is not None:
        raise PlacedError(("hf_config", problem[0]), problem[1])
    heads = model.hf_config.get("num_attention_heads")
    if model.num_kv_heads is not None and heads is not None:
        refused = heads_problem(model.num_kv_heads, heads)
        if refused is not None:
            raise PlacedError(("num_kv_heads",), refused)


def _numbers_for_kinds(model: _Described) -> None:
    kinds = set(model.layer_kinds())
    for kind, (key, source) in KIND_NUMBERS.items():
        value = getattr(model, key)
        if kind in kinds and value is None:
            raise PlacedError(
                ("layer_pattern",), f"has {kind} layers, so '{key}' is needed ({source})"
            )
        if kind not in kinds and value is not None:
            raise PlacedError((key,), f"is for {kind} layers, and layer_pattern has none")
    attention = kinds - {"mamba", "mla", "no_cache"}
    for key, source in (("num_kv_heads", "num_key_value_heads"), ("head_size", "head_dim")):
        if attention and getattr(model, key) is None:
            raise PlacedError(
                ("layer_pattern",),
                f"has attention layers, so '{key}' is needed (config.json's {source})",
            )


def _hf_config_needed(model: _Described) -> None:
    mamba = set(model.layer_kinds()) & {"mamba", "full+mamba"}
    if mamba and not model.hf_config:
        raise PlacedError(
            ("layer_pattern",),
            "has Mamba layers, so 'hf_config' is needed: config.json's model_type and the keys "
            "its Mamba state is computed from",
        )
    if model.hf_config and "model_type" not in model.hf_config:
        raise PlacedError(
            ("hf_config",), "needs 'model_type' (config.json's): it picks transformers' config"
        )


def _value(model: _Described, key: tuple[str, ...]) -> Any:
    value: Any = model
    for part in key:
        value = getattr(value, part, None)
    return value


def _stated_twice(model: _Described) -> None:
    for key, config_keys in STATED_TWICE.items():
        ours = _value(model, key)
        for config_key in config_keys:
            theirs = model.hf_config.get(config_key)
            if ours is None or theirs is None or ours == theirs:
                continue
            raise PlacedError(
                key,
                f"{ours!r} here, but hf_config.{config_key} is {theirs!r}: "
                "a number stated twice must agree",
            )


def _layer_counts(model: _Described) -> None:
    for config_key in LAYER_LISTS:
        listed = model.hf_config.get(config_key)
        if isinstance(listed, list | str) and len(listed) != model.num_layers:
            raise PlacedError(
                ("num_layers",),
                f"{model.num_layers} here, but hf_config.{config_key} has {len(listed)} layers",
            )
    period = len(model.layer_pattern)
    whole, rest = divmod(model.num_layers, period)
    if rest and "num_hidden_layers" not in model.hf_config:
        raise PlacedError(
            ("num_layers",),
            f"{model.num_layers} layers is {whole} x the {period}-layer layer_pattern and {rest} "
            "more; a model whose last repeat is cut short states config.json's num_hidden_layers "
            "and pattern keys in hf_config, so that transformers' config checks the layers",
        )
