"""One place for every difference between vLLM releases.

The harness asks an adapter questions ("build me a scheduler for this case", "what state is
each request in?", "install this reservation") and never checks versions itself. Adapters are
chosen from the installed vLLM's version (``RELEASES``); importing this package imports no vLLM.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Protocol

from matrix.schema import CaseFile, RequestSpec, VariantName


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
    release: str  # the installed vLLM version, and the adapter driving it when it is not known

    def build(self, case: CaseFile, pool: int) -> SchedulerHandle: ...

    def unsupported(self, case: CaseFile) -> str | None:
        """Why this release cannot run ``case`` (a feature it lacks), or None."""
        ...


@dataclass(frozen=True)
class Requirement:
    """Something of vLLM's that an adapter drives; probed before any case runs, so a release
    without it skips with this description instead of failing with an AttributeError."""

    description: str
    met: Callable[[], bool]


@dataclass(frozen=True)
class Release:
    adapter: str  # "module:class"
    ships: VariantName  # the variant this release's stock reservation is (see variants.py)


# Known releases (major.minor), oldest first. Each adapter subclasses the previous one and
# overrides only what its release changed.
RELEASES: dict[str, Release] = {
    "0.30": Release("matrix.adapters.v0_30:Vllm030", ships="none"),
    "0.31": Release("matrix.adapters.v0_31:Vllm031", ships="original"),
    "0.32": Release("matrix.adapters.v0_32:Vllm032", ships="fixed"),
    "0.33": Release("matrix.adapters.v0_32:Vllm032", ships="fixed"),  # same scheduler shape
}


def installed_vllm_version() -> str | None:
    try:
        return metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return None


def _release_key(version: str) -> tuple[int, int]:
    numbers = [int(n) for n in re.findall(r"\d+", version)[:2]]
    numbers += [0] * (2 - len(numbers))
    return numbers[0], numbers[1]


def release_of(version: str) -> str:
    """``0.31.2+cpu`` -> ``0.31``."""
    return "{}.{}".format(*_release_key(version))


def nearest_release(version: str) -> str:
    """The known release an installed version is driven as: itself when known, else the newest
    known release not newer than it (a dev build of 0.34 is tried as 0.33), else the oldest."""
    key = _release_key(version)
    known = sorted(RELEASES, key=_release_key)
    older = [r for r in known if _release_key(r) <= key]
    return older[-1] if older else known[0]


def shipped_variant(version: str | None) -> VariantName:
    """The variant the installed release ships as its stock reservation; stock is expected to
    behave exactly like it. Read from the version alone, without importing vLLM. Without vLLM
    nothing runs, and the newest release's is as good as any."""
    newest = max(RELEASES, key=_release_key)
    return RELEASES[nearest_release(version or newest)].ships


def release_label(version: str) -> str:
    """The version, and for a release not in ``RELEASES`` the adapter that drives it."""
    release = nearest_release(version)
    if _release_key(version) == _release_key(release):
        return version
    return f"{version} (unknown release, driven by the {release} adapter)"


def select_adapter(version: str | None = None) -> VersionAdapter:
    version = installed_vllm_version() if version is None else version
    if version is None:
        raise UnsupportedRelease("vLLM is not installed (run through tox, e.g. tox -e vllm033)")
    release = nearest_release(version)
    module_name, class_name = RELEASES[release].adapter.split(":")
    # An adapter module raises UnsupportedRelease, naming the import, when vLLM lacks one.
    adapter_type = getattr(importlib.import_module(module_name), class_name)
    requirements: tuple[Requirement, ...] = adapter_type.requirements
    missing = [r.description for r in requirements if not r.met()]
    if missing:
        raise UnsupportedRelease(
            f"vLLM {version} lacks what the {release} adapter drives: {'; '.join(missing)}"
        )
    adapter: VersionAdapter = adapter_type(release_label(version))
    return adapter
