"""What an adapter drives of vLLM, checked before any case runs (:class:`Requirement`): the
entries of the surface list (``surface``) an adapter needs, each made a requirement by
:func:`required`, and the requirements every release shares."""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from vllm.config import CacheConfig, KVTransferConfig, SchedulerConfig
from vllm.v1.core.sched.scheduler import Scheduler

from matrix.adapters import surface
from matrix.adapters.surface import Use
from matrix.adapters.surface_probe import assigned_names, holds, parameter_names


@dataclass(frozen=True)
class Requirement:
    """Something of vLLM's that an adapter drives; probed before any case runs, so a release
    without it skips with this description instead of failing with an AttributeError."""

    description: str
    met: Callable[[], bool]


# For a requirement the surface list cannot state (prefer a ``Use`` there: the probe then
# records it too).


def init_assigns(name: str) -> bool:
    """``Scheduler.__init__`` sets ``self.<name>``."""
    return name in assigned_names(Scheduler)


def accepts(function: Any, *parameters: str) -> bool:
    """``function`` takes every one of ``parameters``."""
    return set(parameters) <= parameter_names(function)


def release_failure_policies() -> tuple[str, ...]:
    """The ``kv_load_failure_policy`` values the installed release knows."""
    field = KVTransferConfig.__dataclass_fields__["kv_load_failure_policy"]
    return typing.get_args(field.type)


def missing_scheduler_settings(names: Iterable[str]) -> list[str]:
    """Those of ``names`` the installed release's ``SchedulerConfig`` has no field for."""
    return [name for name in names if name not in SchedulerConfig.__dataclass_fields__]


def missing_connector_options(connector: str, options: Iterable[str]) -> list[str]:
    """Those of ``options`` (set for ``connector``) that the installed release's connector does
    not read: OffloadingConnector's ``sync_load_budget_bytes`` came with 0.33; an option it
    ignored would make the cell test a case other than the one written."""
    if connector != "offloading" or "sync_load_budget_bytes" not in options:
        return []
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading import scheduler

    config = getattr(scheduler, "SchedulerOffloadConfig", None)
    if config is not None and "sync_load_budget_bytes" in config._fields:
        return []
    return ["sync_load_budget_bytes"]


def release_mamba_modes() -> tuple[str, ...]:
    """The Mamba cache modes the installed release knows."""
    field = CacheConfig.__dataclass_fields__["mamba_cache_mode"]
    return typing.get_args(field.type) or ("none", "align")


def release_has_bounded_replay() -> bool:
    """Whether the installed release's ``SlidingWindowMLASpec`` has DeepSeek-V4.1's bounded
    replay (0.31 on)."""
    from vllm.v1.kv_cache_interface import SlidingWindowMLASpec

    return "bounded_replay" in SlidingWindowMLASpec.__dataclass_fields__


def required(use: Use) -> Requirement:
    """The requirement that ``use`` (an entry of the surface list) holds, in its words."""
    return Requirement(use.describe(), partial(holds, use))


SHARED_REQUIREMENTS = tuple(required(use) for use in surface.SHARED)
INDEXED_RUNNER_OUTPUT = required(surface.INDEXED_RUNNER_OUTPUT)
