"""The model runner a scheduler is built for (``engine.model_runner``): vLLM reads that choice
from the environment (``VLLM_USE_V2_MODEL_RUNNER``) when its config and scheduler are built,
as an engine started with it would; a release with one runner has no choice to make."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from vllm.config import VllmConfig

RUNNER_VARIABLE = "VLLM_USE_V2_MODEL_RUNNER"


def has_two_runners() -> bool:
    """Whether the installed release chooses between the V1 and V2 model runners (0.34 has
    one, which takes a preempted request back as new)."""
    return hasattr(VllmConfig, "use_v2_model_runner")


@contextmanager
def model_runner(choice: str | None) -> Iterator[None]:
    """While a config or a scheduler is built: the model runner ``choice`` (``v1``, ``v2``, or
    None: the release's own) chosen as an engine chooses it."""
    if choice is None:
        yield
        return
    before = os.environ.get(RUNNER_VARIABLE)
    os.environ[RUNNER_VARIABLE] = "1" if choice == "v2" else "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ[RUNNER_VARIABLE]
        else:
            os.environ[RUNNER_VARIABLE] = before
