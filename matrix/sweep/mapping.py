"""An architecture -> the model type whose default config stands for it, from the installed
packages only (no Hub): the first source that names it, in this order:

1. vLLM's ``_ARCHITECTURE_TO_MODEL_TYPE`` (checkpoints whose config has no model_type);
2. transformers' auto mappings naming the exact class (causal LM first, then image-text-to-text,
   multimodal LM, seq2seq causal LM, speech seq2seq, then the others);
3. the default ``architectures`` of vLLM's own config classes;
4. by name: a model type equal to the class name without its suffix (``ChatGLMModel`` ->
   ``chatglm``), else vLLM's module name when it is a model type.

An architecture none of them names is ``unmapped``: its checkpoints' configs are remote code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

# transformers' auto mappings, in the order they are asked; the rest follow in name order.
FIRST_MAPPINGS = (
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
    "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
)
SUFFIXES = re.compile(
    r"(ForCausalLM|ForConditionalGeneration|LMHeadModel|ForBlockDiffusion|Model|ForCTC)$"
)


@dataclass(frozen=True)
class Mapped:
    """The model type an architecture is read as, and which source named it."""

    model_type: str
    source: str  # vllm | transformers | vllm-config | name | module


def _normal(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@cache
def _transformers_classes() -> dict[str, str]:
    """Each class transformers' auto mappings name -> its model type (earlier mappings win)."""
    from transformers.models.auto import modeling_auto

    mappings = [n for n in vars(modeling_auto) if n.endswith("_MAPPING_NAMES")]
    ordered = [*FIRST_MAPPINGS, *sorted(set(mappings) - set(FIRST_MAPPINGS))]
    found: dict[str, str] = {}
    for mapping_name in ordered:
        mapping = getattr(modeling_auto, mapping_name, None)
        if not isinstance(mapping, dict) or mapping_name == "CONFIG_MAPPING_NAMES":
            continue
        for model_type, classes in mapping.items():
            for name in (classes,) if isinstance(classes, str) else tuple(classes):
                found.setdefault(str(name), str(model_type))
    return found


@cache
def registered_config_classes() -> dict[str, Any]:
    """The config classes vLLM reads a model type with instead of transformers' (its own)."""
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    classes: dict[str, Any] = {}
    for model_type in list(_CONFIG_REGISTRY):
        try:
            classes[model_type] = _CONFIG_REGISTRY[model_type]
        except (AttributeError, ImportError):  # a lazy entry this release cannot load
            continue
    return classes


@cache
def vllm_config_classes() -> dict[str, Any]:
    """vLLM's own config classes by model type: those it registers, then those
    ``vllm.transformers_utils.configs`` exports unregistered (a text model's, DotsOCR's)."""
    from vllm.transformers_utils import configs

    classes = dict(registered_config_classes())
    for name in sorted(getattr(configs, "__all__", ())):
        try:
            exported = getattr(configs, name)
        except (AttributeError, ImportError):
            continue
        model_type = getattr(exported, "model_type", None)
        if isinstance(exported, type) and isinstance(model_type, str) and model_type:
            classes.setdefault(model_type, exported)
    return classes


@cache
def _vllm_config_architectures() -> dict[str, str]:
    """Each architecture a vLLM config class names by default -> that class's model type."""
    found: dict[str, str] = {}
    for model_type, config_class in sorted(vllm_config_classes().items()):
        try:
            names = config_class().architectures or []
        except Exception:  # a class that needs arguments names nothing by default
            continue
        for name in names:
            found.setdefault(str(name), model_type)
    return found


@cache
def known_model_types() -> frozenset[str]:
    """Every model type transformers or vLLM has a config class for."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return frozenset(CONFIG_MAPPING_NAMES) | frozenset(vllm_config_classes())


def model_type_of(architecture: str, module: str) -> Mapped | None:
    """The model type ``architecture`` is read as, or None (unmapped)."""
    from vllm.transformers_utils import config as vllm_config

    named = getattr(vllm_config, "_ARCHITECTURE_TO_MODEL_TYPE", {}).get(architecture)
    if named is not None:
        return Mapped(named, "vllm")
    if architecture in _transformers_classes():
        return Mapped(_transformers_classes()[architecture], "transformers")
    if architecture in _vllm_config_architectures():
        return Mapped(_vllm_config_architectures()[architecture], "vllm-config")
    by_name = {_normal(t): t for t in sorted(known_model_types())}
    stem = _normal(SUFFIXES.sub("", architecture))
    if stem in by_name:
        return Mapped(by_name[stem], "name")
    if _normal(module) in by_name:
        return Mapped(by_name[_normal(module)], "module")
    return None
