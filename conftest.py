"""Repository-wide pytest settings. Runs before any test module imports vLLM, so the offline
switches hold for every case and test (no model hub, no telemetry)."""

import os

for variable, value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_LOGGING_LEVEL": "ERROR",
}.items():
    os.environ.setdefault(variable, value)
