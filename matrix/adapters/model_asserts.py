"""What a model class asserts of its config's MLA numbers before it builds its attention layers,
read from the class's own module: a config that leaves one of them None derives a layout (vLLM's
``ModelConfig`` then reads the model as having no MLA: ``full``), yet the model refuses it.

Kimi Linear's default config (vLLM's ``KimiLinearConfig``) has ``kv_lora_rank=None``, and its
model asserts ``kv_lora_rank is not None`` for every attention layer: such a config is refused
with that reason, never given a layout.
"""

from __future__ import annotations

import inspect
import re
from functools import cache
from pathlib import Path
from typing import Any

# The numbers an MLA layer is built from (its cache: kv_lora_rank + qk_rope_head_dim a token).
MLA_NUMBERS = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
_ASSERTED = re.compile(
    r"^\s*assert\s+(?:self\.)?(?:config\.)?(" + "|".join(MLA_NUMBERS) + r")\s+is\s+not\s+None\b",
    re.M,
)


@cache
def asserted_numbers(architecture: str) -> dict[str, str]:
    """Each MLA number the architecture's model module asserts is set -> where
    (``vllm/models/kimi_k3/nvidia/model.py:752``); empty when the module does not import."""
    from vllm.model_executor.models import ModelRegistry

    entry = ModelRegistry.models.get(architecture)
    try:
        module = inspect.getmodule(entry.load_model_cls()) if entry is not None else None
        source = inspect.getsource(module) if module is not None else ""
        path = inspect.getsourcefile(module) if module is not None else None
    except (ImportError, OSError, TypeError):  # what the layout's own path reports
        return {}
    shown = _within_vllm(Path(path)) if path else architecture
    found: dict[str, str] = {}
    for match in _ASSERTED.finditer(source):
        line = source.count("\n", 0, match.start(1)) + 1
        found.setdefault(match.group(1), f"{shown}:{line}")
    return found


def _within_vllm(path: Path) -> str:
    """``path`` from vLLM's package folder on (``vllm/models/...``)."""
    parts = path.parts
    return (
        "/".join(parts[len(parts) - parts[::-1].index("vllm") - 1 :])
        if "vllm" in parts
        else path.name
    )


def mla_refusal(architecture: str, text_config: Any, has_attention: bool) -> str | None:
    """Why the architecture's model refuses a config with attention layers that leaves an MLA
    number it asserts None, or None."""
    unset = [name for name in MLA_NUMBERS if getattr(text_config, name, 0) is None]
    if not has_attention or not unset:  # most configs have none of these keys
        return None
    asserted = asserted_numbers(architecture)
    for name in unset:
        if name in asserted:
            return (
                f"{name} is None, and vLLM's {architecture} asserts {name} is not None for "
                f"its attention layers ({asserted[name]}): the model cannot be built"
            )
    return None
