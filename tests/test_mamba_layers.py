"""A Mamba layer class's own prefill checkpoint blocks: from 0.32 vLLM's ``MambaMixer2``
(``get_kv_cache_spec``) keeps one checkpoint block, alignment 1, on every device and in every
Mamba mode, so the Mamba2 hybrids' derived specs carry it; ``MambaMixer`` (Jamba) and 0.30/0.31
keep none (vllm/model_executor/layers/mamba/mamba_mixer2.py, read in 0.30 to 0.34)."""

from __future__ import annotations

from typing import Any

import pytest

from matrix.installed import installed_release
from tests.helpers import needs_vllm
from tests.test_devices import layout_of

MAMBA2_HYBRIDS = ("nemotron-nano-9b-v2", "granite-4.0-h-tiny", "falcon-h1", "zamba2-2.7b")


def mamba2_checkpoints() -> bool:
    """Whether the installed release's MambaMixer2 keeps a checkpoint block (0.32 on)."""
    major, minor = (int(part) for part in installed_release().split(".")[:2])
    return (major, minor) >= (0, 32)


def mamba_specs(slug: str, **settings: Any) -> list[Any]:
    from vllm.v1.kv_cache_interface import MambaSpec

    layers = layout_of(slug, **settings).layers.values()
    return [spec for spec in layers if isinstance(spec, MambaSpec)]


@needs_vllm
@pytest.mark.parametrize("slug", MAMBA2_HYBRIDS)
@pytest.mark.parametrize("mode", ["align", "none"])
def test_a_mamba2_hybrid_keeps_mamba_mixer2s_checkpoint_block(
    adapter: Any, slug: str, mode: str
) -> None:
    specs = mamba_specs(slug, mamba_mode=mode)
    assert specs
    expected = (1, 1) if mamba2_checkpoints() else (0, None)
    for spec in specs:
        fields = (
            getattr(spec, "num_prefill_checkpoint_blocks", 0),
            getattr(spec, "prefill_checkpoint_alignment", None),
        )
        assert fields == expected


@needs_vllm
def test_jamba_and_qwen3_next_on_sm80_keep_none(adapter: Any) -> None:
    """MambaMixer has no such override; Qwen3-Next's GDN checkpoints only on FlashInfer."""
    for slug in ("jamba-mini", "qwen3-next-80b-a3b"):
        specs = mamba_specs(slug, mamba_mode="align")
        assert specs
        assert {getattr(s, "num_prefill_checkpoint_blocks", 0) for s in specs} == {0}


@needs_vllm
def test_the_layer_class_is_the_one_the_model_module_names(adapter: Any) -> None:
    from vllm.model_executor.layers.mamba.mamba_mixer import MambaMixer
    from vllm.model_executor.layers.mamba.mamba_mixer2 import MambaMixer2

    from matrix.adapters.mamba_layers import layer_classes

    assert layer_classes("NemotronHForCausalLM") == (MambaMixer2,)
    assert layer_classes("Zamba2ForCausalLM") == (MambaMixer2,)
    assert layer_classes("JambaForCausalLM") == (MambaMixer,)


@needs_vllm
def test_show_layout_reports_the_checkpoint_block_in_align_mode(adapter: Any) -> None:
    from tests.test_models import layout

    report = layout("nemotron-nano-9b-v2", mamba_mode="align")
    mamba = [g for g in report["groups"] if g["kind"] == "mamba"]
    assert {g["prefill_checkpoint_blocks"] for g in mamba} == {int(mamba2_checkpoints())}
    # In mode none the spec keeps the field, but nothing in vLLM reads it: none is shown.
    report = layout("nemotron-nano-9b-v2", mamba_mode="none")
    assert {g["prefill_checkpoint_blocks"] for g in report["groups"]} == {0}
