"""Device profiles: what a described model's layout takes from the device vLLM runs on.

vLLM picks each layer's attention backend by the device (``vllm/platforms/cuda.py``:
``_get_backend_priorities``, the first backend whose ``validate_configuration`` accepts the
case; ``vllm/platforms/cpu.py`` on a CPU), and the backend's kernel block sizes then set the
cache block: the block a backend prefers (``Platform.update_block_size_for_backend``, from
``CacheConfig.DEFAULT_BLOCK_SIZE``, 128 on a CPU) and the steps a hybrid's block grows in
(``_align_hybrid_block_size``). On SM90 (and SM100 with ``head_k_dim`` 128 and CUDA 13) the
gated delta-net prefill runs on FlashInfer, whose layers in Mamba ``align`` mode report a
prefill checkpoint alignment (``FLASHINFER_GDN_CHECKPOINT_ALIGNMENT``, 64, on 0.33) that the
block is realigned to, and whose state spec keeps one checkpoint block.

``platforms/cuda.py`` does not import without a GPU, nor do FlashInfer's backends without
FlashInfer: the choice for a default case (bfloat16 KV cache, causal attention, no sinks) is
recorded here per device, as read in vLLM 0.31 and 0.33; each backend's block sizes come from
its own class where it imports, else as recorded from its source (tests hold both to vLLM).
What the profiles do not see raises :class:`DeviceError` with the reason.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any

from matrix.case.model import Device, LayoutSettings, ModelDescription


class DeviceError(Exception):
    """A layout this device profile cannot derive; the message says what it does not see."""


@dataclass(frozen=True)
class Backend:
    """An attention backend as vLLM's ``AttentionBackendEnum`` names it, and its kernel block
    sizes as read from its source (used only where its class does not import here)."""

    name: str
    recorded_sizes: tuple[int, ...]
    multiple_of: bool  # the sizes are "a multiple of" (vLLM's MultipleOf)

    def kernel_sizes(self) -> tuple[tuple[int, ...], bool]:
        """The backend's kernel block sizes, from its class where it imports."""
        try:
            from vllm.v1.attention.backend import MultipleOf
            from vllm.v1.attention.backends.registry import AttentionBackendEnum

            declared = (
                AttentionBackendEnum[self.name].get_class().get_supported_kernel_block_sizes()
            )
        except (ImportError, OSError, AssertionError, KeyError):
            return self.recorded_sizes, self.multiple_of
        sizes = tuple(s.base if isinstance(s, MultipleOf) else int(s) for s in declared)
        return sizes, any(isinstance(s, MultipleOf) for s in declared)

    def smallest(self) -> int:
        """The smallest kernel block: the steps a hybrid's block grows in."""
        return min(self.kernel_sizes()[0])

    def preferred(self, default: int) -> int:
        """``AttentionBackend.get_preferred_block_size``: the default where the backend takes
        it, else its smallest kernel block."""
        sizes, multiple_of = self.kernel_sizes()
        takes = any(default % s == 0 for s in sizes) if multiple_of else default in sizes
        return default if takes else min(sizes)


FLASH_ATTN = Backend("FLASH_ATTN", (16,), True)
FLASHINFER = Backend("FLASHINFER", (16, 32, 64), False)  # without trtllm's large pages
TRITON_MLA = Backend("TRITON_MLA", (16,), True)
FLASH_ATTN_MLA = Backend("FLASH_ATTN_MLA", (16,), True)
FLASHINFER_MLA = Backend("FLASHINFER_MLA", (32, 64), False)
CPU_ATTN = Backend("CPU_ATTN", (32,), True)
CPU_MLA = Backend("CPU_MLA", (16,), False)


@dataclass(frozen=True)
class DeviceProfile:
    """What vLLM picks on one device for a default case."""

    name: Device
    attention: Backend  # the first of _get_backend_priorities(use_mla=False) that validates
    mla: Backend  # the same for MLA layers
    default_block_size: int
    flashinfer_gdn: bool  # gated delta-net prefill on FlashInfer (checkpoints in align mode)
    gdn_needs_head_k_dim_128: bool = False  # SM100: FlashInfer GDN only with head_k_dim 128
    cpu: bool = False


PROFILES: dict[Device, DeviceProfile] = {
    # A100: FlashAttention 2; MLA: FLASH_ATTN_MLA and FLASHMLA need SM90, FLASHINFER_MLA SM100.
    "sm80": DeviceProfile("sm80", FLASH_ATTN, TRITON_MLA, 16, flashinfer_gdn=False),
    # H100/H200: FlashAttention 3; MLA on FlashAttention's MLA kernel.
    "sm90": DeviceProfile("sm90", FLASH_ATTN, FLASH_ATTN_MLA, 16, flashinfer_gdn=True),
    # B200: FlashInfer first (TRTLLM); MLA on FlashInfer-MLA (32 or 64, 32 preferred).
    "sm100": DeviceProfile(
        "sm100", FLASHINFER, FLASHINFER_MLA, 16, flashinfer_gdn=True, gdn_needs_head_k_dim_128=True
    ),
    # vLLM's CPU platform: block 128 unless MLA (CPU_MLA takes 16 only).
    "cpu": DeviceProfile("cpu", CPU_ATTN, CPU_MLA, 128, flashinfer_gdn=False, cpu=True),
}


def _gdn_alignment() -> int | None:
    """FlashInfer GDN's prefill checkpoint alignment, where the installed vLLM has one."""
    try:
        module = importlib.import_module("vllm.v1.attention.backends.gdn_attn")
    except ImportError:
        return None
    alignment = getattr(module, "FLASHINFER_GDN_CHECKPOINT_ALIGNMENT", None)
    return int(alignment) if alignment is not None else None


@dataclass(frozen=True)
class DeviceLayout:
    """What one device gives a model's layout."""

    backend: Backend  # its attention layers' backend
    block_size: int  # the block before any hybrid alignment
    kernel_block: int  # the steps a hybrid's block grows in
    checkpoint_alignment: int | None  # Mamba align mode: prefill checkpoints on this grid


def device_layout(model: ModelDescription, settings: LayoutSettings, mla: bool) -> DeviceLayout:
    """The backend, block and alignment ``settings.device`` gives ``model``; raises
    :class:`DeviceError` where the profile cannot tell."""
    profile = PROFILES[settings.device]
    _refuse_unseen(model, settings, profile, mla)
    backend = profile.mla if mla else profile.attention
    kernel = settings.kernel_block_size or backend.smallest()
    block = settings.block_size or (
        backend.preferred(profile.default_block_size)
        if settings.kernel_block_size is None
        else max(profile.default_block_size, kernel)
    )
    return DeviceLayout(backend, block, kernel, _checkpoint_alignment(model, settings, profile))


def device_problem(model: ModelDescription, settings: LayoutSettings) -> str | None:
    """What ``settings.device``'s profile cannot derive for ``model`` (an MLA model on a CPU,
    an fp8 cache on SM90...), or None. Pure: ``validate`` asks it without importing vLLM."""
    mla = model.mla is not None and model.num_kv_heads is None
    try:
        _refuse_unseen(model, settings, PROFILES[settings.device], mla)
    except DeviceError as error:
        return str(error)
    return None


def _checkpoint_alignment(
    model: ModelDescription, settings: LayoutSettings, profile: DeviceProfile
) -> int | None:
    head_k_dim = model.hf_config.get("linear_key_head_dim")  # the Qwen GDN layers' key
    if settings.mamba_mode != "align" or head_k_dim is None or not profile.flashinfer_gdn:
        return None
    if profile.gdn_needs_head_k_dim_128 and head_k_dim != 128:
        return None
    return _gdn_alignment()


def _refuse_unseen(
    model: ModelDescription, settings: LayoutSettings, profile: DeviceProfile, mla: bool
) -> None:
    where = f"device {profile.name}"
    if settings.kv_cache_dtype == "fp8" and profile.name in ("sm90", "sm100"):
        raise DeviceError(
            f"{where}: with an fp8 KV cache vLLM's backend choice turns on the head size and "
            "the FlashAttention build (FA4's fp8 pages on SM90, FlashInfer's on SM100): not "
            "modelled"
        )
    if profile.cpu and mla:
        raise DeviceError(
            f"{where}: vLLM's CPU platform turns chunked prefill and prefix caching off for MLA "
            "models, which the case's engine settings do not follow: not modelled"
        )
    linear: Any = model.hf_config.get("linear_attn_config")
    gated = isinstance(linear, dict) and linear.get("gate_lower_bound") is not None
    if gated and settings.mamba_mode == "align" and not profile.cpu and profile.name != "sm80":
        raise DeviceError(
            f"{where}: a bounded KDA gate may run on FlashKDA, whose 16-token prefill "
            "checkpoints depend on vLLM's build (vllm._flashkda_C): not modelled"
        )


def aligned_block(
    attention_page_per_token: int, mamba_page: int, device: DeviceLayout, mla: bool
) -> int:
    """The attention block of a hybrid model: the smallest multiple of the kernel alignment
    whose page holds a Mamba state page (``_align_hybrid_block_size``'s rule), on the
    checkpoint grid in ``align`` mode."""
    alignment = max(device.kernel_block, device.block_size)
    if mla:
        alignment = max(alignment, 128)  # the MLA decode kernels' alignment
    if device.checkpoint_alignment is not None:
        alignment = math.lcm(alignment, device.checkpoint_alignment)
    aligned = alignment * math.ceil(mamba_page / (alignment * attention_page_per_token))
    aligned = device.kernel_block * math.ceil(aligned / device.kernel_block)
    return max(device.block_size, aligned)
