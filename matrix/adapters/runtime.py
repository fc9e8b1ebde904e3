"""What vLLM needs set before and right after it is imported, done once, when an adapter is
selected, instead of as a side effect of importing some module."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from functools import cache
from typing import TypeVar

from matrix.installed import vllm_cache_root

T = TypeVar("T")

# No model hub, no telemetry: every model is a config.json shipped with the matrix.
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


@cache
def prepare_vllm() -> None:
    """Offline switches and vLLM's cache root (before vLLM reads them at import), the hash seed
    request block hashers need (the engine sets it at start-up), model inspections in this
    process, and a quiet vLLM logger."""
    for variable, value in OFFLINE.items():
        os.environ.setdefault(variable, value)
    os.environ.setdefault("VLLM_CACHE_ROOT", str(vllm_cache_root()))
    # torch warns at import that Triton is absent: true, and nothing the scheduler needs.
    logging.getLogger("torch._library.triton").setLevel(logging.ERROR)
    inspect_models_in_process()
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import init_none_hash

    init_none_hash(sha256)
    logging.getLogger("vllm").setLevel(logging.ERROR)
    # A failed load is a scenario here, not news: the scheduler logs each one as an error.
    logging.getLogger("vllm.v1.core.sched.scheduler").setLevel(logging.CRITICAL)


def inspect_models_in_process() -> None:
    """vLLM learns what a model class supports (``_ModelInfo``) in a subprocess, to keep CUDA
    out of its own process, then caches it under its cache root. The scheduler path touches
    no CUDA, and the subprocess imports vLLM again (6 s a model architecture, on the first run
    per release): the same inspection, vLLM's own, runs here instead, and is cached alike."""
    from vllm.model_executor.models import registry

    def in_this_process(inspect: Callable[[], T]) -> T:
        return inspect()

    registry._run_in_subprocess = in_this_process
