"""What transformers (and vLLM's model module) say of a model description's ``hf_config``, so
that a slip in one is a line at ``validate`` rather than a layout derived wrong in silence
(``matrix.adapters.model_checks`` checks the whole file):

- its ``hf_config`` names a ``model_type`` transformers knows and only keys that model type's
  config class declares or reads, or vLLM's module for the architecture reads (a misspelt key
  would be ignored, and its default taken);
- transformers' config class accepts the numbers (its own checks, one line, no traceback);
- the layers that config makes (``layer_types``) are the description's ``layer_pattern``.

:func:`hf_config_of` is the one place a description's ``hf_config`` becomes transformers'
config, so the layout's derivation refuses bad numbers in the same words.
"""

from __future__ import annotations

import difflib
import importlib.util
import inspect
import re
import sys
from dataclasses import fields, is_dataclass
from functools import cache
from pathlib import Path
from typing import Any

from matrix.architectures import modules
from matrix.case.model import LayerKind, ModelDescription
from matrix.installed import installed_vllm_version

# transformers' names of layer types (a config's ``layer_types``) -> the description's kinds.
LAYER_TYPES: dict[str, frozenset[LayerKind]] = {
    "full_attention": frozenset({"full", "mla"}),
    "attention": frozenset({"full", "mla"}),
    "sliding_attention": frozenset({"sliding_window"}),
    "chunked_attention": frozenset({"chunked_local"}),
    "linear_attention": frozenset({"mamba"}),
    "mamba": frozenset({"mamba"}),
    "conv": frozenset({"mamba"}),  # LFM2's short convolution: a MambaSpec in vLLM
    "hybrid": frozenset({"full+mamba"}),
    "moe": frozenset({"no_cache"}),
    "mlp": frozenset({"no_cache"}),
}


class HfConfigError(ValueError):
    """transformers refuses a description's ``hf_config``; the message is one line and
    ``key`` is the hf_config key it names, if any."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


@cache
def _model_types() -> frozenset[str]:
    """The model types transformers knows (their config classes are imported one by one, as
    asked: importing all of them takes seconds)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return frozenset(CONFIG_MAPPING.keys())


def _did_you_mean(word: str, known: Any) -> str:
    guess = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f": did you mean '{guess[0]}'?" if guess else ""


def config_class(model_type: Any) -> type:
    """transformers' config class for ``model_type``; :class:`HfConfigError` with a
    did-you-mean (never the list of every model type) when there is none."""
    known = _model_types()
    if not isinstance(model_type, str) or model_type not in known:
        guess = _did_you_mean(str(model_type), known)
        raise HfConfigError(f"transformers has no model_type {model_type!r}{guess}", "model_type")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    config_type: type = CONFIG_MAPPING[model_type]
    return config_type


@cache
def _keys_of(config_type: type) -> tuple[frozenset[str], frozenset[str]]:
    """The keys ``config_type`` declares (its fields and aliases), and every name its modules
    quote (keys it reads from its keyword arguments, such as ``sliding_window_pattern``)."""
    declared = {f.name for f in fields(config_type)} if is_dataclass(config_type) else set()
    declared |= set(getattr(config_type, "attribute_map", {}))
    # Its own __init__'s parameters too: a plain class inheriting transformers 5's dataclass
    # config (vLLM's KimiLinearConfig, which vLLM registers for kimi_linear once it has read a
    # config.json) is a dataclass whose fields are only its base's.
    named = inspect.signature(config_type).parameters.values()
    declared |= {p.name for p in named if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    quoted: set[str] = set()
    for base in config_type.__mro__:
        module = sys.modules.get(base.__module__)
        try:
            source = inspect.getsource(module) if module is not None else ""
        except (OSError, TypeError):
            continue
        quoted |= set(re.findall(r"[\"']([A-Za-z_][A-Za-z0-9_]*)[\"']", source))
    return frozenset(declared), frozenset(quoted)


@cache
def vllm_reads(architecture: str) -> frozenset[str]:
    """The config keys vLLM's module for ``architecture`` reads (``config.X``, or quoted): a
    key transformers' class does not declare is still kept as an attribute and read by vLLM
    (LFM2's ``conv_dim``). Read from the installed module's source, without importing it."""
    module = modules(installed_vllm_version() or "").get(architecture)
    spec = importlib.util.find_spec("vllm")
    if not module or module == "-" or spec is None or not spec.submodule_search_locations:
        return frozenset()
    root = Path(next(iter(spec.submodule_search_locations))).parent
    base = root / module.replace(".", "/")
    # A module, or a package (0.31 and 0.33 define KimiLinearForCausalLM in vllm/models/kimi_k3/).
    sources = [base.with_suffix(".py")] if base.with_suffix(".py").is_file() else []
    sources = sources or (sorted(base.rglob("*.py")) if base.is_dir() else [])
    if not sources:
        return frozenset()
    text = "\n".join(s.read_text(encoding="utf-8", errors="replace") for s in sources)
    read = re.findall(r"config\.([A-Za-z_][A-Za-z0-9_]*)", text)
    quoted = re.findall(r"[\"']([A-Za-z_][A-Za-z0-9_]*)[\"']", text)
    return frozenset(read) | frozenset(quoted)


def unknown_keys(hf_config: dict[str, Any], architecture: str = "") -> list[tuple[str, str]]:
    """Each hf_config key that neither transformers' config class declares or reads nor vLLM's
    model module for ``architecture`` reads, with why."""
    config_type = config_class(hf_config.get("model_type"))
    declared, quoted = _keys_of(config_type)
    known = declared | quoted | vllm_reads(architecture)
    return [
        (
            key,
            f"{config_type.__name__} has no key '{key}', nor does vLLM's "
            f"{architecture or 'model'} read one: it would be ignored and its default taken"
            f"{_did_you_mean(key, declared)}",
        )
        for key in hf_config
        if key not in known
    ]


def error_line(error: Exception) -> str:
    """What transformers or vLLM raised, on one line, with its reason: pydantic's errors each
    as ``key: message``, a validator's header (``Validation error for field 'x':``) joined with
    the reason under it, and the exception's name where the message alone says nothing (a
    ``KeyError``'s bare ``'X'``, a ``ZeroDivisionError``)."""
    from pydantic import ValidationError

    if isinstance(error, ValidationError):
        text = "; ".join(
            f"{'.'.join(map(str, e['loc'])) + ': ' if e['loc'] else ''}"
            f"{e['msg'].removeprefix('Value error, ')}"
            for e in error.errors(include_url=False)
        )
    else:
        lines = [line.strip() for line in str(error).splitlines()]
        kept = [line for line in lines if line and not line.startswith("Class validation error")]
        text = " ".join(kept)
        if not text or isinstance(error, LookupError | ArithmeticError):
            text = f"{type(error).__name__}: {text}".rstrip(": ")
    return text if len(text) <= 300 else text[:297] + "..."


def _keys_named(hf_config: dict[str, Any], error: Exception, reason: str) -> list[str]:
    """The hf_config keys a refusal names: by name in its reason, or, for a ``KeyError``, the
    key whose value holds what was looked up (a pattern's unknown character)."""
    named = [key for key in hf_config if re.search(rf"\b{re.escape(key)}\b", reason)]
    if not named and isinstance(error, KeyError) and error.args:
        missing = str(error.args[0])
        named = [key for key, value in hf_config.items() if missing in str(value)]
    return named


def _character_named(hf_config: dict[str, Any], error: Exception, named: list[str]) -> str | None:
    """A ``KeyError`` for one character of a text key (a layer pattern, NemotronH's
    ``hybrid_override_pattern``, a layer a character): which character, and where; None for
    any other refusal."""
    if not (isinstance(error, KeyError) and error.args and named):
        return None
    missing, value = str(error.args[0]), hf_config[named[0]]
    if len(missing) != 1 or not isinstance(value, str) or missing not in value:
        return None
    return (
        f"{missing!r}, character {value.index(missing)} of {named[0]}, is not one it knows "
        f"(KeyError: {missing!r})"
    )


def hf_config_of(hf_config: dict[str, Any]) -> Any:
    """transformers' config built from a description's ``hf_config``; raises
    :class:`HfConfigError` in one line when transformers refuses it."""
    config_type = config_class(hf_config.get("model_type"))
    from transformers import AutoConfig

    try:
        return AutoConfig.for_model(**hf_config)
    except Exception as error:  # transformers' checks raise ValueError, TypeError, its own
        reason = error_line(error)
        named = _keys_named(hf_config, error, reason)
        reason = _character_named(hf_config, error, named) or reason
        defaulted = _defaults_it_may_mean(config_type, hf_config, reason)
        hint = f" (at transformers' defaults here: {', '.join(defaulted)})" if defaulted else ""
        raise HfConfigError(
            f"transformers' {config_type.__name__} refuses it: {reason}{hint}",
            named[0] if named else None,
        ) from None


def _defaults_it_may_mean(config_type: type, hf_config: dict[str, Any], reason: str) -> list[str]:
    """The keys hf_config leaves to their defaults whose names share two words with
    transformers' reason: a check that fails on a default is a key left out."""
    words = set(re.findall(r"[a-z]{4,}", reason.lower()))

    def shared(key: str) -> int:
        parts = [p for p in key.split("_") if len(p) >= 4]
        return sum(any(w.startswith(p) or p.startswith(w) for w in words) for p in parts)

    declared, _ = _keys_of(config_type)
    bases = [base for base in config_type.__mro__[1:] if is_dataclass(base)]
    own = declared - {f.name for base in bases for f in fields(base)}
    return sorted(k for k in own - set(hf_config) if shared(k) >= 2)[:4]


def check_hf_config(model: ModelDescription, error: Any) -> None:
    """A description's ``hf_config`` against transformers: its keys, its numbers and the layers
    its config class makes; calls ``error(where, message)`` per problem."""
    try:
        unknown = unknown_keys(model.hf_config, model.architecture)
        for key, why in unknown:
            error(("hf_config", key), why)
        if unknown:  # their defaults would only make more problems
            return
        config = hf_config_of(model.hf_config)
    except HfConfigError as refused:
        error(("hf_config", refused.key) if refused.key else ("hf_config",), str(refused))
        return
    layer_types = getattr(config, "layer_types", None)
    if not isinstance(layer_types, list | tuple):
        return
    name = type(config).__name__
    if len(layer_types) != model.num_layers:
        stated = "" if "num_hidden_layers" in model.hf_config else " (num_hidden_layers not stated)"
        error(
            ("hf_config",),
            f"transformers' {name} makes {len(layer_types)} layers of it{stated}, "
            f"and num_layers is {model.num_layers}",
        )
        return
    for index, (ours, theirs) in enumerate(zip(model.layer_kinds(), layer_types, strict=True)):
        if ours not in LAYER_TYPES.get(str(theirs), frozenset({ours})):
            error(
                ("layer_pattern",),
                f"makes layer {index} {ours}, but transformers' {name} makes it {theirs} "
                "(from hf_config)",
            )
            return
