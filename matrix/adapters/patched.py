"""A 0.31-0.33 tree carrying the findings' admission fix in vLLM's own source
(docs/findings/patches/vllm-X/3-async-load-admission.patch, ``tox -e patched033``).

Its scheduler admits an async load only if all the request needs to hold its full sequence and
be promoted, counted by ``Scheduler._request_remaining_blocks`` from the admission's hit (the
rule the in-flight loads' reservation follows, on 0.31 too), fits beside the in-flight loads'
reservation; the flat margin (``_spec_decode_step_blocks``) is gone. Whatever its version, this
adapter drives it (``selection``): a variant replaces the admitting request's count as it
replaces a release's margin. Finding 6's patch (``5-partial-load-admission.patch``) checks the
same count before the admission (``Scheduler._async_load_promotion_blocks``); a variant drops
that check too.
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

from vllm.v1.core.sched.scheduler import Scheduler

from matrix.adapters.handle import Handle
from matrix.adapters.requirements import INDEXED_RUNNER_OUTPUT, SHARED_REQUIREMENTS, Requirement
from matrix.adapters.v0_31 import PREFILL_END, Vllm031, Vllm031Handle

REMAINING = "_request_remaining_blocks"
# Finding 6's patch: the admitting load's count, checked beside the in-flight reservation.
PROMOTION = "_async_load_promotion_blocks"
# The patch's parameter: the admission passes the load's tokens (and its local hit).
ADMISSION_HIT = "num_external_computed_tokens"


def carries_patch() -> bool:
    """The installed scheduler counts the admitting request by ``_request_remaining_blocks``
    (the findings' admission patch)."""
    method = getattr(Scheduler, REMAINING, None)
    return callable(method) and ADMISSION_HIT in inspect.signature(method).parameters


class PatchedHandle(Vllm031Handle):
    """A scheduler with the patch: no stock margin, the admitting request counted whole."""

    def stock_margin(self) -> int:
        """0: the admitting request's need is counted by its admission, not kept as a margin
        for every admission (as ``proposed``'s own, which the reservation leaves out too)."""
        return 0

    def drop_stock_margin(self) -> None:
        """Makes this instance's count of an admitting request 0 (the calls that pass its hit),
        so a variant's own margin replaces it; a load in flight is counted as before."""
        counted = getattr(self.scheduler, REMAINING)

        def remaining(request: Any, *hit: Any, **named: Any) -> int:
            return 0 if hit or named else int(counted(request))

        setattr(self.scheduler, REMAINING, remaining)
        if hasattr(self.scheduler, PROMOTION):
            # 0 leaves its check to allocate_slots' own (free - reserved), which it implies.
            setattr(self.scheduler, PROMOTION, lambda *_args, **_named: 0)


class Patched(Vllm031):
    """The adapter for a 0.31-0.33 tree with the admission patch applied."""

    handle_type: ClassVar[type[Handle]] = PatchedHandle
    requirements: ClassVar[tuple[Requirement, ...]] = (
        *SHARED_REQUIREMENTS,
        INDEXED_RUNNER_OUTPUT,
        PREFILL_END,
        Requirement(f"Scheduler.{REMAINING}(..., {ADMISSION_HIT}) (the patch)", carries_patch),
    )
