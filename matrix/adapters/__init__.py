"""One place for every difference between vLLM releases.

The harness asks an adapter questions ("build me a scheduler for this case", "what state is
each request in?", "install this reservation") and never checks versions itself. Adapters are
chosen from the installed vLLM's version; importing this package imports no vLLM.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib import metadata
from typing import Protocol

from matrix.schema import CaseFile, RequestSpec


class UnsupportedRelease(Exception):
    """The installed vLLM cannot run the matrix; the message names what is missing."""


# RequestState.status values the harness and verdict reason about (vLLM's RequestStatus names,
# plus FINISHED for every finished status and for a request the scheduler already dropped).
WAITING = "WAITING"
LOADING = "WAITING_FOR_REMOTE_KVS"
RUNNING = "RUNNING"
PREEMPTED = "PREEMPTED"
FINISHED = "FINISHED"


@dataclass(frozen=True)
class GroupGeometry:
    block_size: int
    is_mamba: bool


@dataclass(frozen=True)
class Geometry:
    """What a reservation rule needs to know about one scheduler instance."""

    spec_step_tokens: int  # 1 + num_spec_tokens + num_lookahead_tokens, or 0 without spec decode
    scheduler_block_size: int
    groups: tuple[GroupGeometry, ...]
    num_lookahead_tokens: int


@dataclass(frozen=True)
class RequestState:
    """A request as the scheduler holds it, in vLLM's own words."""

    request_id: str
    status: str  # see the constants above
    num_computed_tokens: int
    load_reported_done: bool  # the connector output reported its load finished
    num_preemptions: int


@dataclass(frozen=True)
class SchedulerState:
    requests: tuple[RequestState, ...]
    free_blocks: int
    reserved_blocks: int  # what an async-load admission would keep free right now


@dataclass(frozen=True)
class StepOutcome:
    scheduled_tokens: dict[str, int]
    # Free blocks between schedule() and the model output: a request that finishes in this
    # step frees its blocks before the step ends, so this is where usage peaks.
    free_blocks_while_running: int


class SchedulerHandle(Protocol):
    """One real vLLM scheduler built for one case and pool size."""

    def geometry(self) -> Geometry: ...

    def add_request(self, spec: RequestSpec) -> None: ...

    def step(self, finished_loads: set[str]) -> StepOutcome: ...

    def state(self) -> SchedulerState: ...

    def install_reservation(
        self, admission_margin: int, per_request_margin: int, spec_tokens_through_coordinator: bool
    ) -> None:
        """Replace this instance's async-load reservation (never the class's)."""
        ...


class VersionAdapter(Protocol):
    release: str

    def build(self, case: CaseFile, pool: int) -> SchedulerHandle: ...


# Release (major.minor) -> "module:class". Releases not listed are skipped with a reason.
KNOWN_RELEASES: dict[str, str] = {
    "0.33": "matrix.adapters.v0_33:Vllm033",
}


def installed_vllm_version() -> str | None:
    try:
        return metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return None


def select_adapter(version: str | None = None) -> VersionAdapter:
    version = installed_vllm_version() if version is None else version
    if version is None:
        raise UnsupportedRelease("vLLM is not installed (run through tox, e.g. tox -e vllm033)")
    release = ".".join(version.split(".")[:2])
    target = KNOWN_RELEASES.get(release)
    if target is None:
        known = ", ".join(sorted(KNOWN_RELEASES))
        raise UnsupportedRelease(f"vLLM {version}: no adapter for this release (known: {known})")
    module_name, class_name = target.split(":")
    adapter: VersionAdapter = getattr(importlib.import_module(module_name), class_name)(version)
    return adapter
