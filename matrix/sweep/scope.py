"""Which architectures of the installed vLLM's registry the sweep covers: those that generate
text with a KV cache (``_TEXT_GENERATION_MODELS``, ``_MULTIMODAL_MODELS`` and the text and
multimodal entries of ``_TRANSFORMERS_SUPPORTED_MODELS``), not pooling, embedding, reward or
speculative-decoding models, nor the Transformers backend's own classes.
"""

from __future__ import annotations

from dataclasses import dataclass

# The registry's tables in scope -> the sweep's word for each.
TABLES = {
    "_TEXT_GENERATION_MODELS": "text",
    "_MULTIMODAL_MODELS": "multimodal",
    "_TRANSFORMERS_SUPPORTED_MODELS": "transformers",
}


@dataclass(frozen=True)
class Architecture:
    """One architecture in scope: its class name, its registry table and vLLM's module."""

    name: str
    table: str
    module: str


def in_scope() -> list[Architecture]:
    """The installed vLLM's architectures in scope, sorted by name, each once (the first table
    naming it wins)."""
    from vllm.model_executor.models import registry

    found: dict[str, Architecture] = {}
    for attribute, table in TABLES.items():
        entries = getattr(registry, attribute, {})
        for name, value in entries.items():
            module = str(value[0]) if isinstance(value, tuple) and value else "-"
            found.setdefault(name, Architecture(name, table, module))
    return [found[name] for name in sorted(found)]
