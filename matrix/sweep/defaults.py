"""A model type's default config.json, written offline: the config class vLLM reads that model
type with (its own, where it registers one; else transformers', ``AutoConfig.for_model``; else
one vLLM exports without registering it), built with no arguments, ``architectures`` set to
the swept architecture. A default is not a checkpoint (a 4-layer Nemotron-H, a Kimi Linear
without its delta-attention layers): a swept entry is "the default config of X".
"""

from __future__ import annotations

from pathlib import Path

from matrix.case.config_json import CONFIG_JSON
from matrix.sweep.mapping import registered_config_classes, vllm_config_classes


class DefaultConfigError(Exception):
    """No default config could be written for a model type; the message says why."""


def write_default(architecture: str, model_type: str, folder: Path) -> Path:
    """Writes ``folder/<architecture>/config.json``; raises :class:`DefaultConfigError`."""
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    config_class = registered_config_classes().get(model_type)
    if config_class is None and model_type not in CONFIG_MAPPING_NAMES:
        config_class = vllm_config_classes().get(model_type)
    try:
        config = config_class() if config_class is not None else AutoConfig.for_model(model_type)
        config.architectures = [architecture]
        target = folder / architecture
        # As a checkpoint's is written: the keys that differ from the class's defaults (every
        # key would be cheaper, but some classes refuse their own serialised extras: Dbrx's).
        config.save_pretrained(str(target))
    except Exception as error:  # the class's own checks of its defaults
        line = f"{type(error).__name__}: {error}".splitlines()[0]
        raise DefaultConfigError(f"{model_type}'s config class: {line}") from None
    return target / CONFIG_JSON
