"""Every vLLM surface the adapters drive, listed once: each class or function by its import
path, and what of it they use (the parameters they pass, the methods they call or replace, the
attributes they read). Pure data: no vLLM here.

The adapters' requirements are made from these entries (``requirements.required``); the probe
(``surface_probe``, run in a release's env) records each target's actual shape, and
``surface_changes`` says, a line each, what differs between two releases' records
(``python -m matrix releases --probe``, docs/releases.md). A target is ``module:qualname``
(``vllm.v1.outputs:ModelRunnerOutput``, ``...:KVCacheCoordinator.get_num_blocks_to_allocate``);
other tools read :data:`SURFACE` or :func:`targets` as they are. The entries: ``required``
(those the adapters' requirements are made of), ``driven`` (the rest of the scheduler's, the
KV cache's, the requests' and the configs'), ``connectors`` (the connector families'); a
``Use`` is in ``use``.
"""

from __future__ import annotations

from matrix.adapters.surface.connectors import CONNECTOR_USES
from matrix.adapters.surface.driven import DRIVEN
from matrix.adapters.surface.required import (
    ADMISSION_COUNT,
    ALLOCATE_SLOTS,
    CONNECTOR_OUTPUT,
    DEFERRED_FREES,
    DRAFTS,
    FINISH_REQUESTS,
    INDEXED_RUNNER_OUTPUT,
    INFLIGHT_COUNT,
    INFLIGHT_PREFILLS,
    LOADING_STATUS,
    MAMBA_CACHE_MODE,
    NO_SPEC_MARGIN,
    PARKED_RESERVATIONS,
    PREFILL_END,
    REQUEST,
    RESERVATION,
    RUNNER_OUTPUT_034,
    SCHEDULER,
    SCHEDULER_HASH_BLOCK,
    SHARED,
    SPEC_MARGIN_ATTRIBUTE,
    SPEC_MARGIN_METHOD,
)
from matrix.adapters.surface.use import Use

__all__ = [
    "ADMISSION_COUNT",
    "ALLOCATE_SLOTS",
    "CONNECTOR_OUTPUT",
    "DEFERRED_FREES",
    "DRAFTS",
    "DRIVEN",
    "FINISH_REQUESTS",
    "INDEXED_RUNNER_OUTPUT",
    "INFLIGHT_COUNT",
    "INFLIGHT_PREFILLS",
    "LOADING_STATUS",
    "MAMBA_CACHE_MODE",
    "NO_SPEC_MARGIN",
    "PARKED_RESERVATIONS",
    "PREFILL_END",
    "REQUEST",
    "RESERVATION",
    "RUNNER_OUTPUT_034",
    "SCHEDULER",
    "SCHEDULER_HASH_BLOCK",
    "SHARED",
    "SPEC_MARGIN_ATTRIBUTE",
    "SPEC_MARGIN_METHOD",
    "SURFACE",
    "Use",
    "targets",
]

SURFACE: tuple[Use, ...] = (
    *SHARED,
    INDEXED_RUNNER_OUTPUT,
    RUNNER_OUTPUT_034,
    NO_SPEC_MARGIN,
    SPEC_MARGIN_METHOD,
    SPEC_MARGIN_ATTRIBUTE,
    PREFILL_END,
    PARKED_RESERVATIONS,
    *DRIVEN,
    *CONNECTOR_USES,
)


def targets() -> dict[str, tuple[Use, ...]]:
    """Each target, in the list's order, with every use of it."""
    found: dict[str, list[Use]] = {}
    for use in SURFACE:
        found.setdefault(use.target, []).append(use)
    return {target: tuple(uses) for target, uses in found.items()}
