"""Repository-wide pytest settings. Runs before any test module imports vLLM, so the offline
switches hold for every case and test (no model hub, no telemetry)."""

import os

for variable, value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_LOGGING_LEVEL": "ERROR",
    # Fixed now, before pytester points HOME at each test's folder: vLLM inspects a model
    # architecture once per cache root (seconds), and a pytest run in a subprocess would
    # otherwise start with an empty one.
    "VLLM_CACHE_ROOT": os.path.join(os.path.expanduser("~"), ".cache", "vllm"),
}.items():
    os.environ.setdefault(variable, value)
