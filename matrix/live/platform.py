"""The device vLLM detects for a live engine (and the process's NIXL side-channel port, see
``port``), and the two settings of vLLM's CPU platform that
the live mode undoes, once per process, before any config is built.

- **Async scheduling.** ``CpuPlatform.check_and_update_config`` turns ``async_scheduling``
  off ("not required on CPU"). The live mode keeps what the config asked for, so a case's
  asynchronous cells run ``AsyncScheduler`` and ``EngineCore.step_with_batch_queue`` on the
  engine, and the harness's schedulers built in the same process are the same as in the lean
  envs (where no platform changes the setting). vLLM's own rules before the platform hook
  (refusing async scheduling with ngram, for instance) still apply.
- **Kernel overrides.** The CPU worker registers its kernel overrides at every start; the
  second time in one process it fails on an attribute of llvmlite (imported by the ngram
  drafter). The overrides are process-wide, so the live mode registers them once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from matrix.adapters.runtime import prepare_vllm
from matrix.live.port import claim_side_channel_port

# An in-process EngineCore (no engine process): the live mode steps it and reads its scheduler.
LIVE_ENVIRONMENT = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
# Defaults (the user's settings win): one compute thread, not bound to a core. The tiny
# model's forward passes are dominated by thread start-up and contention: measured on a loaded
# 2-core machine, a live run took 0.05-0.1 s this way and about 1 s with vLLM's default (its
# OpenMP threads bound to every core). Read when torch starts, so set before vLLM is imported.
THREAD_DEFAULTS = {"OMP_NUM_THREADS": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}


@dataclass(frozen=True)
class Device:
    """The device vLLM runs the live engine on."""

    name: str  # the platform vLLM detected: "cpu", "cuda", "rocm" ...
    on_cpu: bool
    dtype: str  # the model's: float32 on a CPU, bfloat16 on a GPU (attention kernels' choice)


def detect_device() -> Device | str:
    """The device vLLM detects, or why there is none to run an engine on. Claims this
    process's NIXL side-channel port first (``port``): raises ``PortTaken`` when the one the
    user set is taken."""
    claim_side_channel_port()
    os.environ.update(LIVE_ENVIRONMENT)
    for variable, value in THREAD_DEFAULTS.items():
        os.environ.setdefault(variable, value)
    prepare_vllm()
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        _adjust_cpu_platform(type(current_platform))
        return Device("cpu", True, "float32")
    if current_platform.is_cuda_alike():
        return Device(str(current_platform.device_type), False, "bfloat16")
    return (
        f"vLLM detects no device to run an engine on (platform "
        f"{type(current_platform).__name__}): the live mode needs vLLM's CPU wheel "
        "(tox -e live031) or a GPU with vLLM's CUDA wheel"
    )


_adjusted: list[Any] = []  # the platform classes already adjusted (once per process)


def _adjust_cpu_platform(platform: Any) -> None:
    if platform in _adjusted:
        return
    _adjusted.append(platform)
    check = platform.check_and_update_config

    def keep_async_scheduling(cls: Any, vllm_config: Any) -> None:
        asked = vllm_config.scheduler_config.async_scheduling
        check(vllm_config)
        vllm_config.scheduler_config.async_scheduling = asked

    platform.check_and_update_config = classmethod(keep_async_scheduling)
    register = getattr(platform, "register_triton_kernel_overrides", None)
    if register is None:
        return
    registered: list[bool] = []

    def register_once(cls: Any) -> None:
        if not registered:
            register()
            registered.append(True)

    platform.register_triton_kernel_overrides = classmethod(register_once)
