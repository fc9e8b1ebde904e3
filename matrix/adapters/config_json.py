"""A model's ``config.json`` -> vLLM's ``ModelConfig`` over its folder -> the model's numbers.

vLLM reads the folder offline, with no tokenizer and no weights, as ``vllm serve <folder>``
would: its config classes parse the file (transformers', or vLLM's own for the model types
transformers lacks), and ``ModelConfig`` answers the layout's questions (layers, KV heads,
head size, MLA, sliding window). For a multimodal model the text config is used, as vLLM's
multimodal classes build their language model: ``get_text_config()``, as the text model class
transformers names for its ``model_type``.

Which kind each layer is comes from the same config fields the model classes read when they
build their attention and Mamba layers (each rule names the class); the numbers become a
:class:`ModelDescription`, whose layout ``matrix.adapters.layout`` derives with vLLM's specs and
grouping, the config object itself feeding the Mamba state functions.
"""

from __future__ import annotations

import difflib
from functools import cache
from typing import Any

from vllm.config import ModelConfig

from matrix.adapters.model_asserts import mla_refusal
from matrix.adapters.model_files import error_line
from matrix.adapters.registry import architecture_problem, quiet_imports
from matrix.case.config_json import ConfigDocument, ConfigModel, read_config_json
from matrix.case.model import LayerKind, MlaRanks, ModelDescription
from matrix.case.reading import CaseFileError


class ConfigJsonError(CaseFileError):
    """vLLM cannot read a config.json as a model; one line at the key to fix."""


# Keys of a layer list -> the kind of each entry (transformers' and vLLM's spellings).
LAYER_TYPE_KINDS: dict[str, LayerKind] = {
    "full_attention": "full",
    "attention": "full",
    "sliding_attention": "sliding_window",
    "chunked_attention": "chunked_local",
    "linear_attention": "mamba",  # Qwen3-Next's gated delta-net: a MambaSpec
    "mamba": "mamba",
    "conv": "mamba",  # LFM2's short convolution: a MambaSpec (Lfm2ShortConv is a MambaBase)
    "hybrid": "full+mamba",  # Zamba2: a Mamba layer that also runs the shared attention
    "mlp": "no_cache",
    "moe": "no_cache",
}
# NemotronH's hybrid_override_pattern, one character a layer (nemotron_h.py's layer classes).
PATTERN_KINDS: dict[str, LayerKind] = {"M": "mamba", "*": "full", "-": "no_cache", "E": "no_cache"}
DTYPES = ("bfloat16", "float16", "float32")
# The config numbers a layer's KV cache spec is sized by (transformers may vary them per layer).
KV_NUMBERS = frozenset(
    {
        "head_dim",
        "num_key_value_heads",
        "num_attention_heads",
        "sliding_window",
        "attention_chunk_size",
        "kv_lora_rank",
        "qk_rope_head_dim",
    }
)


def _declared_dtype(document: ConfigDocument) -> str:
    """The dtype a CUDA engine's ``dtype=auto`` takes: the config's (the text model's first),
    float32 (or none stated: transformers' default) downcast to bfloat16."""
    for block in (document.text_config(), document.data):
        for key in ("torch_dtype", "dtype"):
            value = block.get(key)
            if value in DTYPES:
                return "bfloat16" if value == "float32" else str(value)
    return "bfloat16"


def _text_model(config: Any) -> Any:
    """The text model of a multimodal config, named by transformers' causal LM class for its
    model_type (Gemma3ForConditionalGeneration -> Gemma3ForCausalLM), as vLLM builds it."""
    text = config.get_text_config()
    if text is config:
        return config
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(text.model_type)
    # Only a class vLLM's registry has: else vLLM would fall back to its Transformers backend,
    # not the class its multimodal model builds (BailingMoeV3VL's text model), so the
    # multimodal class itself answers, as the engine's does.
    known = name is not None and architecture_problem(name) is None
    text.architectures = [name] if known else list(config.architectures or [])
    return text


def _known_model_types() -> list[str]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    names = set(CONFIG_MAPPING.keys())
    try:
        from vllm.transformers_utils.config import _CONFIG_REGISTRY  # vLLM's own config classes

        names |= set(_CONFIG_REGISTRY)
    except ImportError:
        pass
    return sorted(names)


def _error(document: ConfigDocument, where: tuple[str | int, ...], message: str) -> ConfigJsonError:
    line = document.line_of(where)
    return ConfigJsonError(document.path, line, f"{where[0] if where else 'config'}: {message}")


def _check_before_reading(model: ConfigModel, document: ConfigDocument) -> None:
    """What would make vLLM's reading fail with a page of traceback, as a line at its key."""
    problem = architecture_problem(model.architecture)
    if problem is not None:
        raise _error(document, ("architectures", 0), problem)
    known = _known_model_types()
    where: tuple[str, ...] = ("text_config",) if "text_config" in document.data else ()
    for place in {(), where}:
        block = document.data if not place else document.data[place[0]]
        model_type = block.get("model_type")
        if model_type not in known:
            guess = difflib.get_close_matches(str(model_type), known, n=1, cutoff=0.6)
            hint = f": did you mean '{guess[0]}'?" if guess else ""
            message = f"neither transformers nor vLLM knows model_type {model_type!r}{hint}"
            raise document.error((*place, "model_type"), message, ConfigJsonError)
        problem = _pattern_problem(block.get("hybrid_override_pattern"))
        if problem is not None:  # transformers' NemotronHConfig would raise a bare KeyError
            raise document.error((*place, "hybrid_override_pattern"), problem, ConfigJsonError)


def _pattern_problem(pattern: Any) -> str | None:
    """Why NemotronH's ``hybrid_override_pattern`` builds no model: a character that is no
    layer class of nemotron_h.py's (its first); None when each is one, or there is none."""
    if not isinstance(pattern, str):
        return None
    for layer, character in enumerate(pattern):
        if character not in PATTERN_KINDS:
            return (
                f"{character!r}, layer {layer}'s character, is none that vLLM's NemotronH "
                f"builds a layer for ({', '.join(PATTERN_KINDS)})"
            )
    return None


@cache
def _read(model: ConfigModel) -> tuple[ModelConfig, ConfigDocument]:
    document = read_config_json(model.folder / "config.json")
    _check_before_reading(model, document)
    try:
        with quiet_imports():
            config = ModelConfig(
                model=str(model.folder),
                skip_tokenizer_init=True,
                dtype=_declared_dtype(document),
                hf_overrides=_text_model,
            )
    except Exception as error:  # vLLM's and transformers' checks: ValueError, their own
        raise _error(document, (), f"vLLM cannot read it: {error_line(error)}") from None
    return config, document


def model_config(model: ConfigModel) -> ModelConfig:
    """vLLM's ModelConfig over the model's folder (read once per file); raises
    :class:`ConfigJsonError`."""
    return _read(model)[0]


def check_max_model_len(model: ConfigModel, max_model_len: int) -> str | None:
    """Why vLLM refuses ``max_model_len`` for this model (longer than it derives), or None."""
    config = model_config(model)
    try:
        config.get_and_verify_max_len(max_model_len)
    except Exception as error:  # vLLM raises ValueError (pydantic's on some releases)
        return error_line(error)
    return None


def _check_modelled(config: ModelConfig) -> None:
    """Raises ValueError, naming what of the model the layout does not model."""
    if config.is_encoder_decoder:
        raise ValueError(
            "cross attention (an encoder-decoder model's decoder reads its encoder's KV): "
            "not modelled"
        )
    text = config.hf_text_config
    per_layer = set(getattr(text, "per_layer_attributes", None) or ())
    varying = ", ".join(sorted(per_layer & KV_NUMBERS))
    if getattr(text, "is_heterogeneous", False) is True and varying:  # transformers' per layer
        raise ValueError(
            f"numbers that differ per layer ({varying}: transformers' per_layer_config): "
            "not modelled"
        )


def layer_kinds(config: ModelConfig) -> tuple[LayerKind, ...]:
    """Every layer's kind, as the model class reads its config when it builds its layers."""
    text = config.hf_text_config
    _check_modelled(config)
    count = int(config.get_total_num_hidden_layers())
    attention: LayerKind = "mla" if config.use_mla else "full"
    if config.is_attention_free:  # Mamba, Mamba2, FalconMamba: a state in every layer
        state: LayerKind = "mamba"
        return (state,) * count
    pattern = getattr(text, "hybrid_override_pattern", None)
    if isinstance(pattern, str):  # nemotron_h.py: a layer class per character
        return tuple(PATTERN_KINDS[c] for c in pattern)
    if config.architecture == "FalconH1ForCausalLM":  # falcon_h1.py: both in every layer
        both: LayerKind = "full+mamba"
        return (both,) * count
    kda = getattr(text, "is_kda_layer", None)
    if callable(kda):  # kimi_linear.py: a KDA (linear-attention) layer or MLA
        linear: LayerKind = "mamba"
        return tuple(linear if kda(i) else attention for i in range(count))
    no_rope = getattr(text, "no_rope_layers", None)
    if no_rope and getattr(text, "attention_chunk_size", None):  # llama4.py: NoPE is global
        return tuple("chunked_local" if no_rope[i] else "full" for i in range(count))
    for key in ("layers_block_type", "layer_types"):  # jamba, zamba2; gemma, qwen3_next, ...
        listed = getattr(text, key, None)
        if isinstance(listed, list | tuple):
            kinds = [LAYER_TYPE_KINDS.get(str(name)) for name in listed]
            if None in kinds:
                unknown = listed[kinds.index(None)]
                raise ValueError(f"{key}: a layer type vLLM's layout is not known for: {unknown}")
            return tuple(attention if k == "full" else k for k in kinds if k is not None)
    # No per-layer list: vLLM's engine args give every layer the model's sliding window
    # (CacheConfig.sliding_window, when layer_types is absent or all sliding; Mistral 7B).
    return ("sliding_window" if config.get_sliding_window() else attention,) * count


def description(model: ConfigModel) -> tuple[ModelDescription, Any]:
    """The model's numbers as vLLM reads them, and the (text) config object the model class's
    Mamba state functions read; raises :class:`ConfigJsonError`."""
    config, document = _read(model)
    text = config.hf_text_config
    try:
        kinds = layer_kinds(config)
    except (ValueError, IndexError, TypeError) as error:
        raise _error(document, (), f"vLLM's layers: {error}") from None
    refusal = mla_refusal(config.architecture, text, bool(set(kinds) - {"mamba", "no_cache"}))
    if refusal is not None:
        raise _error(document, (), refusal)
    attention = set(kinds) - {"mamba", "mla", "no_cache"}
    window = config.get_sliding_window() if "sliding_window" in kinds else None
    chunk = getattr(text, "attention_chunk_size", None) if "chunked_local" in kinds else None
    mla = None
    if "mla" in kinds:
        mla = MlaRanks(kv_lora_rank=text.kv_lora_rank, qk_rope_head_dim=text.qk_rope_head_dim)
    try:
        described = _described(model, config, document, kinds, mla, window, chunk, attention)
    except ValueError as error:  # pydantic's: the numbers vLLM read break a description rule
        raise _error(document, (), f"vLLM's numbers: {error_line(error)}") from None
    return described, config.hf_config


def _described(
    model: ConfigModel,
    config: ModelConfig,
    document: ConfigDocument,
    kinds: tuple[LayerKind, ...],
    mla: MlaRanks | None,
    window: int | None,
    chunk: int | None,
    attention: set[LayerKind],
) -> ModelDescription:
    text = config.hf_text_config
    # The file's own keys (the text model's), for what the layout reads of them; the dtype is
    # the one resolved above, not restated.
    keys = {k: v for k, v in document.text_config().items() if k not in ("torch_dtype", "dtype")}
    return ModelDescription(
        source=model.path,
        architecture=config.architecture,
        dtype=_declared_dtype(document),  # type: ignore[arg-type]
        num_layers=len(kinds),
        layer_pattern=list(kinds),
        num_kv_heads=config.get_total_num_kv_heads() if attention else None,
        head_size=config.get_head_size() if attention else None,
        sliding_window=window,
        attention_chunk_size=chunk,
        mla=mla,
        hf_config={"model_type": text.model_type, **keys},
    )
