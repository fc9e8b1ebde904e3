"""One place for every difference between vLLM releases.

The harness asks an adapter questions ("build me a scheduler for this case", "what state is
each request in?", "install this reservation") and never checks versions itself. Adapters are
chosen from the installed vLLM's version (``RELEASES``); importing this package imports no vLLM.

Modules: ``protocol`` (what the harness sees), ``runtime`` (vLLM's start-up switches),
``config`` (a case -> ``VllmConfig`` and ``KVCacheConfig``), ``handle`` (one real scheduler,
stepped), ``probe`` (what an adapter needs of vLLM, checked before any case runs), and one
module per release difference: ``v0_30`` (the oldest), ``v0_31``, ``v0_32`` (also 0.33).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata

from matrix.adapters.protocol import (
    FINISHED,
    LOADING,
    PREEMPTED,
    RUNNING,
    WAITING,
    BlockAccount,
    Geometry,
    GroupGeometry,
    Refused,
    RequestState,
    SchedulerHandle,
    SchedulerState,
    Status,
    StepOutcome,
    UnsupportedRelease,
    VersionAdapter,
)
from matrix.variant_names import BuiltInVariant

__all__ = [
    "FINISHED",
    "LOADING",
    "PREEMPTED",
    "RELEASES",
    "RUNNING",
    "WAITING",
    "BlockAccount",
    "Geometry",
    "GroupGeometry",
    "Refused",
    "Release",
    "RequestState",
    "Requirement",
    "SchedulerHandle",
    "SchedulerState",
    "Status",
    "StepOutcome",
    "UnsupportedRelease",
    "VersionAdapter",
    "adapter_or_refusal",
    "installed_vllm_version",
    "nearest_release",
    "release_key",
    "release_label",
    "release_of",
    "select_adapter",
    "shipped_variant",
]


@dataclass(frozen=True)
class Requirement:
    """Something of vLLM's that an adapter drives; probed before any case runs, so a release
    without it skips with this description instead of failing with an AttributeError."""

    description: str
    met: Callable[[], bool]


@dataclass(frozen=True)
class Release:
    adapter: str  # "module:class"
    ships: BuiltInVariant  # the variant this release's stock reservation is (see variants.py)


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


def release_key(version: str) -> tuple[int, int]:
    """``0.31.2+cpu`` -> ``(0, 31)``: what orders releases."""
    numbers = [int(n) for n in re.findall(r"\d+", version)[:2]]
    numbers += [0] * (2 - len(numbers))
    return numbers[0], numbers[1]


def release_of(version: str) -> str:
    """``0.31.2+cpu`` -> ``0.31``."""
    return "{}.{}".format(*release_key(version))


def nearest_release(version: str) -> str:
    """The known release an installed version is driven as: itself when known, else the newest
    known release not newer than it (a dev build of 0.34 is tried as 0.33), else the oldest."""
    key = release_key(version)
    known = sorted(RELEASES, key=release_key)
    older = [r for r in known if release_key(r) <= key]
    return older[-1] if older else known[0]


def shipped_variant(version: str | None, dev_build: bool = False) -> BuiltInVariant:
    """The variant the installed release ships as its stock reservation; stock is expected to
    behave exactly like it. Read from the version alone, without importing vLLM. Without vLLM
    nothing runs, and the newest release's is as good as any. A dev build (a checkout or a
    local wheel) is held to the newest release's: a branch is expected to keep the fix."""
    newest = max(RELEASES, key=release_key)
    return RELEASES[newest if dev_build else nearest_release(version or newest)].ships


def release_label(version: str) -> str:
    """The version, and for a release not in ``RELEASES`` the adapter that drives it."""
    release = nearest_release(version)
    if release_key(version) == release_key(release):
        return version
    return f"{version} (unknown release, driven by the {release} adapter)"


def select_adapter(version: str | None = None) -> VersionAdapter:
    """The adapter for the installed vLLM (or ``version``), its requirements probed; raises
    :class:`UnsupportedRelease` naming what is missing."""
    version = installed_vllm_version() if version is None else version
    if version is None:
        raise UnsupportedRelease("vLLM is not installed (run through tox, e.g. tox -e vllm033)")
    release = nearest_release(version)
    module_name, class_name = RELEASES[release].adapter.split(":")
    try:
        from matrix.adapters.runtime import prepare_vllm

        prepare_vllm()
        adapter_type = getattr(importlib.import_module(module_name), class_name)
    except ImportError as error:
        raise UnsupportedRelease(f"vLLM lacks an import the adapters need: {error}") from error
    requirements: tuple[Requirement, ...] = adapter_type.requirements
    missing = [r.description for r in requirements if not r.met()]
    if missing:
        raise UnsupportedRelease(
            f"vLLM {version} lacks what the {release} adapter drives: {'; '.join(missing)}"
        )
    adapter: VersionAdapter = adapter_type(release_label(version))
    return adapter


def adapter_or_refusal() -> VersionAdapter:
    """The installed release's adapter, or one that refuses every case with the reason."""
    try:
        return select_adapter()
    except UnsupportedRelease as error:
        return Refused(str(error))
