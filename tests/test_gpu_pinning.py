"""Each xdist worker sees its own GPU; decided before anything imports torch."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from matrix.gpus import gpu_for_worker


def test_workers_round_robin_over_the_listed_gpus() -> None:
    assert gpu_for_worker("gw0", "0,1,2,3") == "0"
    assert gpu_for_worker("gw5", "4,5") == "5"
    assert gpu_for_worker("gw2", " 6, 7 ") == "6"


def test_no_pinning_outside_xdist_or_with_one_gpu() -> None:
    assert gpu_for_worker(None, "0,1") is None
    assert gpu_for_worker("master", "0,1") is None
    assert gpu_for_worker("gw1", "0") is None
    assert gpu_for_worker("gw1", None) is None


def test_plugin_imports_no_torch_or_vllm() -> None:
    code = (
        "import sys, matrix.plugin, matrix.run.cell; "
        "print(sorted(m for m in ('torch', 'vllm') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


CUDA_DEVICE_COUNT = """
import ctypes
def cuda_device_count():
    # The driver API honours CUDA_VISIBLE_DEVICES and needs no CUDA build of torch.
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value
"""


def _visible_gpus() -> int:
    namespace: dict[str, Any] = {}
    exec(CUDA_DEVICE_COUNT, namespace)
    count: int = namespace["cuda_device_count"]()
    return count


@pytest.mark.skipif(_visible_gpus() == 0, reason="needs an NVIDIA GPU and its driver")
def test_each_worker_sees_one_cuda_device(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_device=CUDA_DEVICE_COUNT
        + """
import os, pathlib
def record():
    worker = os.environ["PYTEST_XDIST_WORKER"]
    line = f"{worker} {os.environ['CUDA_VISIBLE_DEVICES']} {cuda_device_count()}"
    pathlib.Path(f"seen-{worker}.txt").write_text(line)
def test_record(): record()
"""
    )
    # With one GPU both workers are pinned to it, which still shows the pinning happens.
    gpus = ["0", "1"] if _visible_gpus() >= 2 else ["0", "0"]
    result = pytester.runpytest_subprocess(
        "-n", "2", "--dist", "each", f"--matrix-gpus={','.join(gpus)}"
    )
    result.assert_outcomes(passed=2)
    seen = [p.read_text().split() for p in pytester.path.glob("seen-*.txt")]
    assert {worker: (gpu, count) for worker, gpu, count in seen} == {
        "gw0": (gpus[0], "1"),
        "gw1": (gpus[1], "1"),
    }
