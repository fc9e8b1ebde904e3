"""What an adapter drives of vLLM, checked before any case runs (:class:`Requirement`), and
the requirements every release shares."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from vllm.config import CacheConfig, KVTransferConfig, SchedulerConfig
from vllm.v1.core.kv_cache_coordinator import KVCacheCoordinator
from vllm.v1.core.kv_cache_manager import KVCacheManager
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.core.single_type_kv_cache_manager import SingleTypeKVCacheManager
from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput
from vllm.v1.request import Request, RequestStatus

from matrix.adapters.protocol import LOADING


@dataclass(frozen=True)
class Requirement:
    """Something of vLLM's that an adapter drives; probed before any case runs, so a release
    without it skips with this description instead of failing with an AttributeError."""

    description: str
    met: Callable[[], bool]


def init_assigns(name: str) -> bool:
    """``Scheduler.__init__`` sets ``self.<name>`` (the names its code object uses)."""
    return name in Scheduler.__init__.__code__.co_names


def accepts(function: Any, *parameters: str) -> bool:
    """``function`` takes every one of ``parameters``."""
    return set(parameters) <= set(inspect.signature(function).parameters)


def release_failure_policies() -> tuple[str, ...]:
    """The ``kv_load_failure_policy`` values the installed release knows."""
    field = KVTransferConfig.__dataclass_fields__["kv_load_failure_policy"]
    return typing.get_args(field.type)


def missing_scheduler_settings(names: Iterable[str]) -> list[str]:
    """Those of ``names`` the installed release's ``SchedulerConfig`` has no field for."""
    return [name for name in names if name not in SchedulerConfig.__dataclass_fields__]


def release_mamba_modes() -> tuple[str, ...]:
    """The Mamba cache modes the installed release knows."""
    field = CacheConfig.__dataclass_fields__["mamba_cache_mode"]
    return typing.get_args(field.type) or ("none", "align")


SHARED_REQUIREMENTS = (
    Requirement(
        "Scheduler._inflight_prefill_reserved_blocks (the async-load reservation variants replace)",
        lambda: callable(getattr(Scheduler, "_inflight_prefill_reserved_blocks", None)),
    ),
    Requirement(
        "Scheduler._inflight_prefills (the set of in-flight async loads)",
        lambda: init_assigns("_inflight_prefills"),
    ),
    Requirement(
        "Scheduler(hash_block_size=...)", lambda: accepts(Scheduler.__init__, "hash_block_size")
    ),
    Requirement(
        "KVCacheCoordinator.get_num_blocks_to_allocate(num_tokens_main_model=..., "
        "apply_admission_cap=..., ...) (an in-flight load's remaining blocks)",
        lambda: accepts(
            KVCacheCoordinator.get_num_blocks_to_allocate,
            *("request_id", "num_tokens", "new_computed_blocks", "num_encoder_tokens"),
            *("total_computed_tokens", "num_local_computed_tokens", "num_tokens_main_model"),
            "apply_admission_cap",
        ),
    ),
    Requirement(
        "SingleTypeKVCacheManager.get_num_blocks_to_allocate(num_tokens=..., "
        "new_computed_blocks=..., total_computed_tokens=..., num_local_computed_tokens=..., "
        "num_tokens_main_model=..., apply_admission_cap=...) (an admitting request's own need, "
        "group by group: adapters/admission.py)",
        lambda: accepts(
            SingleTypeKVCacheManager.get_num_blocks_to_allocate,
            *("request_id", "num_tokens", "new_computed_blocks", "total_computed_tokens"),
            *("num_local_computed_tokens", "num_tokens_main_model", "apply_admission_cap"),
        ),
    ),
    Requirement(
        "KVCacheManager.allocate_slots(reserved_blocks=..., delay_cache_blocks=...) (where a "
        "per-admission margin is added; see Handle.install_reservation)",
        lambda: accepts(KVCacheManager.allocate_slots, "reserved_blocks", "delay_cache_blocks"),
    ),
    Requirement(
        "KVConnectorOutput(finished_recving=..., failed_recving=..., invalid_block_ids=...) "
        "(how a load reports completion or failure)",
        lambda: accepts(
            KVConnectorOutput, "finished_recving", "failed_recving", "invalid_block_ids"
        ),
    ),
    Requirement(
        "Scheduler.deferred_frees (blocks whose return to the pool waits for a step)",
        lambda: init_assigns("deferred_frees"),
    ),
    Requirement(
        "Scheduler.finish_requests(request_ids, finished_status) (how the engine aborts)",
        lambda: accepts(Scheduler.finish_requests, "request_ids", "finished_status"),
    ),
    Requirement(
        "Request(..., block_hasher=...)",
        lambda: accepts(Request, "prompt_token_ids", "sampling_params", "block_hasher"),
    ),
    Requirement(
        "CacheConfig.mamba_cache_mode",
        lambda: "mamba_cache_mode" in CacheConfig.__dataclass_fields__,
    ),
    Requirement(
        "RequestStatus.WAITING_FOR_REMOTE_KVS (a request whose KV is loading)",
        lambda: hasattr(RequestStatus, LOADING),
    ),
    Requirement(
        "Scheduler.update_draft_token_ids (the drafts a step proposes)",
        lambda: callable(getattr(Scheduler, "update_draft_token_ids", None)),
    ),
)

INDEXED_RUNNER_OUTPUT = Requirement(
    "ModelRunnerOutput(req_ids, req_id_to_index, sampled_token_ids, kv_connector_output)",
    lambda: accepts(
        ModelRunnerOutput,
        *("req_ids", "req_id_to_index", "sampled_token_ids", "kv_connector_output"),
    ),
)
