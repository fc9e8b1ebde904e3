"""Each xdist worker sees its own GPU; decided before anything imports torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from matrix.plugin import gpu_for_worker


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
        "import sys, matrix.plugin, matrix.harness; "
        "print(sorted(m for m in ('torch', 'vllm') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def _visible_gpus() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return out.stdout.count("GPU ") if out.returncode == 0 else 0


@pytest.mark.skipif(_visible_gpus() < 2, reason="needs a machine with two or more NVIDIA GPUs")
def test_each_worker_sees_one_cuda_device(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_device="""
        import os, pathlib, torch
        def record():
            worker = os.environ["PYTEST_XDIST_WORKER"]
            line = f"{worker} {os.environ['CUDA_VISIBLE_DEVICES']} {torch.cuda.device_count()}"
            pathlib.Path(f"seen-{worker}.txt").write_text(line)
        def test_one(): record()
        def test_two(): record()
    """
    )
    gpus = ",".join(str(i) for i in range(_visible_gpus()))
    result = pytester.runpytest_subprocess("-n", "2", f"--matrix-gpus={gpus}")
    result.assert_outcomes(passed=2)
    seen = [p.read_text().split() for p in pytester.path.glob("seen-*.txt")]
    assert {worker: (gpu, count) for worker, gpu, count in seen} == {
        "gw0": ("0", "1"),
        "gw1": ("1", "1"),
    }
