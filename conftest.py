"""Repository-wide pytest settings. Runs before any test module imports vLLM, so the offline
switches hold for every case and test (no model hub, no telemetry)."""

import os

from matrix.installed import vllm_cache_root

for variable, value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_LOGGING_LEVEL": "ERROR",
}.items():
    os.environ.setdefault(variable, value)
# Fixed now, before pytester points HOME at each test's folder: vLLM inspects a model
# architecture once per cache root, and a pytest run in a subprocess would otherwise start
# with an empty one. The release's own root, which its envs share (matrix.installed).
os.environ.setdefault("VLLM_CACHE_ROOT", str(vllm_cache_root()))
