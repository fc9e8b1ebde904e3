"""A 0.31-0.34 tree carrying the findings' admission fix in vLLM's own source
(docs/findings/patches/vllm-X/3-async-load-admission.patch, ``tox -e patched034``).

Its scheduler admits an async load only if all the request needs to hold its full sequence and
be promoted, counted from the admission's hit as the in-flight loads' reservation counts it (on
0.31 too), fits beside the in-flight loads' reservation; the flat margin
(``_spec_decode_step_blocks``) is gone. The count that takes the hit is
``_request_remaining_blocks`` on 0.31-0.33 and ``_num_blocks_to_promote`` on 0.34, whose
``_request_remaining_blocks`` (a parked load's cached reservation) keeps its signature.
Whatever its version, the release's patched adapter drives it (``selection``): a variant
replaces the admitting request's count as it replaces a release's margin.
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

from vllm.v1.core.sched.scheduler import Scheduler

from matrix.adapters.handle import Handle
from matrix.adapters.protocol import UnsupportedRelease
from matrix.adapters.requirements import Requirement
from matrix.adapters.v0_30 import Vllm030
from matrix.adapters.v0_31 import Vllm031Handle
from matrix.adapters.v0_32 import SPEC_STEP_ATTRIBUTE, Vllm032
from matrix.adapters.v0_34 import Vllm034, Vllm034Handle

# The patch's parameter: the admission passes the load's tokens (and its local hit).
ADMISSION_HIT = "num_external_computed_tokens"
# The scheduler methods that may take it, the newest release's first.
ADMISSION_COUNTS = ("_num_blocks_to_promote", "_request_remaining_blocks")


def admission_count() -> str | None:
    """The installed scheduler's method that counts an admitting request from its hit (the
    findings' admission patch), or None on a release without the patch."""
    for name in ADMISSION_COUNTS:
        method = getattr(Scheduler, name, None)
        if callable(method) and ADMISSION_HIT in inspect.signature(method).parameters:
            return name
    return None


def carries_patch() -> bool:
    """The installed scheduler counts the admitting request whole (the findings' patch)."""
    return admission_count() is not None


class PatchedAdmission(Handle):
    """What the patch changes for a handle of any release: no stock margin, the admitting
    request counted whole by the scheduler's own count, which a variant replaces."""

    def stock_margin(self) -> int:
        """0: the admitting request's need is counted by its admission, not kept as a margin
        for every admission (as ``proposed``'s own, which the reservation leaves out too)."""
        return 0

    def drop_stock_margin(self) -> None:
        """Makes this instance's count of an admitting request 0 (the calls that pass its hit),
        so a variant's own margin replaces it; a load in flight is counted as before."""
        name = admission_count()
        if name is None:
            raise UnsupportedRelease("the scheduler carries no admission patch")
        counted = getattr(self.scheduler, name)

        def count(request: Any, *hit: Any, **named: Any) -> int:
            return 0 if hit or named else int(counted(request))

        setattr(self.scheduler, name, count)


class PatchedHandle(PatchedAdmission, Vllm031Handle):
    """A patched 0.31-0.33 scheduler."""


class Patched034Handle(PatchedAdmission, Vllm034Handle):
    """A patched 0.34 scheduler: 0.34's worker output and parked loads, the patch's count."""


PATCH = Requirement(
    f"Scheduler.{ADMISSION_COUNTS[1]} or .{ADMISSION_COUNTS[0]}(..., {ADMISSION_HIT}) "
    "(the findings' admission patch)",
    carries_patch,
)


def _unpatched(release: type[Vllm030]) -> tuple[Requirement, ...]:
    """The release adapter's requirements less its margin, which the patch removes."""
    return (*(r for r in release.requirements if r is not SPEC_STEP_ATTRIBUTE), PATCH)


class Patched(Vllm032):
    """The adapter for a 0.31-0.33 tree with the admission patch applied."""

    handle_type: ClassVar[type[Handle]] = PatchedHandle
    requirements: ClassVar[tuple[Requirement, ...]] = _unpatched(Vllm032)


class Patched034(Vllm034):
    """The adapter for a 0.34 tree with the admission patch applied."""

    handle_type: ClassVar[type[Handle]] = Patched034Handle
    requirements: ClassVar[tuple[Requirement, ...]] = _unpatched(Vllm034)


def patched_adapter(release: type[Vllm030]) -> type[Vllm030]:
    """The patched adapter for a tree of the release ``release`` drives."""
    return Patched034 if issubclass(release, Vllm034) else Patched
