"""What vLLM needs set before and right after it is imported, done once, when an adapter is
selected, instead of as a side effect of importing some module."""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Callable
from functools import cache
from typing import TypeVar

from matrix.installed import vllm_cache_root
from matrix.lifeline import die_with_parent

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
    inspect_models_in_a_fork()
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import init_none_hash

    init_none_hash(sha256)
    logging.getLogger("vllm").setLevel(logging.ERROR)
    # A failed load is a scenario here, not news: the scheduler logs each one as an error.
    logging.getLogger("vllm.v1.core.sched.scheduler").setLevel(logging.CRITICAL)


def inspect_models_in_a_fork() -> None:
    """vLLM learns what a model class supports (``_ModelInfo``) in a subprocess, to keep the
    model's module (and CUDA) out of its own process, then caches it under its cache root. That
    subprocess imports vLLM again: 6 s an architecture, on the first run per release. Here the
    same inspection, vLLM's own, runs in a fork of this process, which has vLLM imported: the
    model's module stays out of this process as vLLM intends (importing one twice registers
    its torch operators twice), and the result is cached alike. Without ``fork``, vLLM's
    subprocess stays."""
    if not hasattr(os, "fork"):
        return
    from vllm.model_executor.models import registry

    registry._run_in_subprocess = in_a_fork


def in_a_fork(inspect: Callable[[], T]) -> T:
    """``inspect()`` run in a forked child, its result pickled back; an exception in the child
    is raised here, as vLLM's subprocess runner raises it."""
    read, write = os.pipe()
    parent = os.getpid()
    child = os.fork()
    if child == 0:  # the child: answer, then leave without running anything of the parent's
        die_with_parent(parent)
        os.close(read)
        try:
            answer = pickle.dumps((True, inspect()))
        except BaseException as error:  # the parent raises it
            answer = pickle.dumps((False, f"{type(error).__name__}: {error}"))
        with os.fdopen(write, "wb") as pipe:
            pipe.write(answer)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(child, 0)
    if not answer:
        raise RuntimeError("Error raised in subprocess: the inspecting process died")
    succeeded, value = pickle.loads(answer)  # our own child's answer
    if not succeeded:
        raise RuntimeError(f"Error raised in subprocess: {value}")
    result: T = value
    return result
