"""Device profiles (issue 19): the attention backend vLLM picks on a device sets the cache
block, and on Hopper and Blackwell 0.33 realigns Qwen3-Next's block to FlashInfer's GDN
checkpoint grid. Layouts are worked out by hand from the profile's backend and vLLM's rules."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest

from matrix.adapters.devices import PROFILES, Backend
from tests.helpers import needs_vllm
from tests.test_models import hybrid_block, layout


def gdn_checkpoints() -> bool:
    """Whether the installed vLLM realigns FlashInfer GDN prefills (0.33 does, 0.31 not)."""
    from matrix.adapters.devices import _gdn_alignment

    return _gdn_alignment() == 64


@needs_vllm
def test_qwen3_next_align_follows_the_device(adapter: Any) -> None:
    """544 on sm80 (FlashAttention, Triton GDN); on sm90 and sm100 0.33's FlashInfer GDN
    prefill reports a checkpoint alignment of 64, so the block is the smallest multiple of 64
    holding the state, 576, and the GDN groups keep a prefill checkpoint block; 128-token steps
    on a CPU."""
    sm80 = layout("qwen3-next-80b-a3b", mamba_mode="align")
    assert sm80["scheduler_block_size"] == 544
    assert {g["prefill_checkpoint_blocks"] for g in sm80["groups"]} == {0}
    for device in ("sm90", "sm100"):
        report = layout("qwen3-next-80b-a3b", mamba_mode="align", device=device)
        expected = 64 * math.ceil(544 / 64) if gdn_checkpoints() else 544
        assert report["scheduler_block_size"] == expected == report["groups"][0]["block_size"]
        mamba = [g for g in report["groups"] if g["kind"] == "mamba"]
        assert {g["prefill_checkpoint_blocks"] for g in mamba} == {int(gdn_checkpoints())}
    # Mode none takes no checkpoints: the block is the state's, on every GPU.
    assert layout("qwen3-next-80b-a3b", device="sm90")["groups"][-1]["block_size"] == 544
    assert layout("qwen3-next-80b-a3b", mamba_mode="align", device="cpu")[
        "scheduler_block_size"
    ] == 128 * math.ceil(544 / 128)


@needs_vllm
def test_mla_block_follows_the_device(adapter: Any) -> None:
    """DeepSeek-V3: Triton MLA on sm80 and FlashAttention-MLA on Hopper take 16; Blackwell's
    FlashInfer-MLA takes 32 or 64, and vLLM picks its smallest."""
    blocks = {
        device: layout("deepseek-v3", device=device)["groups"][0]["block_size"]
        for device in ("sm80", "sm90", "sm100")
    }
    assert blocks == {"sm80": 16, "sm90": 16, "sm100": 32}


@needs_vllm
def test_a_cpu_starts_at_128_and_aligns_hybrids_in_128s(adapter: Any) -> None:
    """vLLM's CPU platform starts from a block of 128 (its CPU attention backend takes
    multiples of 32) and aligns a hybrid's block in steps of that block."""
    assert layout("llama-3.1-8b", device="cpu")["groups"][0]["block_size"] == 128
    per_token = 2 * 4 * 128 * 2  # Granite: K and V of 4 heads x 128 in bf16
    granite = layout("granite-4.0-h-tiny", device="cpu")["groups"][-1]["block_size"]
    assert granite == 128 * math.ceil(hybrid_block(400 * per_token, per_token) / 128) == 512


@needs_vllm
def test_what_a_profile_does_not_see_is_said(adapter: Any) -> None:
    from matrix.adapters.layout import LayoutError

    with pytest.raises(LayoutError, match=r"^device sm100: with an fp8 KV cache vLLM's backend"):
        layout_of("llama-3.1-8b", device="sm100", kv_cache_dtype="fp8")
    with pytest.raises(LayoutError, match=r"^device cpu: vLLM's CPU platform turns chunked"):
        layout_of("deepseek-v3", device="cpu")


def layout_of(slug: str, **settings: Any) -> Any:
    from matrix.adapters.kv_cache import layout_for
    from matrix.case.format import CaseFile
    from matrix.case.loading import read_description
    from matrix.case.model_paths import SHIPPED_MODELS as SHIPPED_DESCRIPTIONS

    case = CaseFile.model_validate(
        {
            "name": "x",
            "model": slug,
            "described": read_description(SHIPPED_DESCRIPTIONS / f"{slug}.yaml"),
            "layout": settings,
            "pool": 2,
            "requests": [{"id": "a", "prompt": 1}],
        }
    )
    return layout_for(case)


def backend_source(backend: Backend) -> str:
    module = {
        "FLASHINFER": "vllm.v1.attention.backends.flashinfer",
        "FLASHINFER_MLA": "vllm.v1.attention.backends.mla.flashinfer_mla",
        "FLASH_ATTN_MLA": "vllm.v1.attention.backends.mla.flashattn_mla",
    }[backend.name]
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).read_text()


@needs_vllm
def test_recorded_block_sizes_are_vllms(adapter: Any) -> None:
    """Where a profile's backend imports here its class gives the sizes; where it does not
    (FlashInfer is not installed) the recorded sizes are those its source returns."""
    literal = {
        "FLASHINFER": "return [16, 32, 64]",
        "FLASHINFER_MLA": "return [32, 64]",
        "FLASH_ATTN_MLA": "return [MultipleOf(16)]",
    }
    backends = {b.name: b for p in PROFILES.values() for b in (p.attention, p.mla)}
    for backend in backends.values():
        if backend.name in literal:
            assert literal[backend.name] in backend_source(backend)
        else:
            assert backend.kernel_sizes() == (backend.recorded_sizes, backend.multiple_of)


@needs_vllm
def test_show_layout_prints_the_device(adapter: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from matrix.__main__ import main

    args = ["show-layout", "qwen3-next-80b-a3b", "--mamba-mode", "align", "--device", "sm90"]
    assert main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["device"] == "sm90"
    assert main(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("qwen3-next-80b-a3b on vLLM ") and out[0].endswith(", sm90: 4 groups")
    if gdn_checkpoints():
        assert out[1].endswith("mamba_mode align, 1 prefill checkpoint block")
