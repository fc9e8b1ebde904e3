"""What vLLM needs set before and right after it is imported, done once, when an adapter is
selected, instead of as a side effect of importing some module."""

from __future__ import annotations

import logging
import os
from functools import cache

# No model hub, no telemetry: every model is a config.json shipped with the matrix.
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


@cache
def prepare_vllm() -> None:
    """Offline switches (before vLLM reads them at import), the hash seed request block
    hashers need (the engine sets it at start-up), and a quiet vLLM logger."""
    for variable, value in OFFLINE.items():
        os.environ.setdefault(variable, value)
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import init_none_hash

    init_none_hash(sha256)
    logging.getLogger("vllm").setLevel(logging.ERROR)
    # A failed load is a scenario here, not news: the scheduler logs each one as an error.
    logging.getLogger("vllm.v1.core.sched.scheduler").setLevel(logging.CRITICAL)
