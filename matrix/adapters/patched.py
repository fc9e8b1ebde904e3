"""A 0.31-0.33 tree carrying the findings' fix in vLLM's own source (docs/findings/patches/,
``tox -e patched033``): ``proposed`` as vLLM code.

Its admission keeps free, beside what the in-flight loads still need for their full sequence
and first speculative step (0.32's rule, on 0.31 too), what the admitting request's own
promotion needs beyond its load, counted per group by the KV cache coordinator
(``Scheduler._async_load_promotion_blocks``), in place of a flat margin. Whatever its version,
this adapter drives it (``selection``): a variant replaces that count as it replaces a
release's margin.
"""

from __future__ import annotations

from typing import ClassVar

from vllm.v1.core.sched.scheduler import Scheduler

from matrix.adapters.handle import Handle
from matrix.adapters.requirements import SHARED_REQUIREMENTS, Requirement
from matrix.adapters.v0_31 import PREFILL_END, Vllm031, Vllm031Handle

PROMOTION = "_async_load_promotion_blocks"  # the patch's method: the admitting request's need


def carries_patch() -> bool:
    """The installed scheduler counts the admitting request's promotion itself (the patch)."""
    return callable(getattr(Scheduler, PROMOTION, None))


class PatchedHandle(Vllm031Handle):
    """A scheduler with the patch: no stock margin, the promotion counted at admission."""

    def stock_margin(self) -> int:
        """0: the admitting request's need is counted by its admission, not kept as a margin
        for every admission (as ``proposed``'s own, which the reservation leaves out too)."""
        return 0

    def drop_stock_margin(self) -> None:
        """Makes this instance's promotion count 0, so a variant's own margin replaces it."""
        setattr(self.scheduler, PROMOTION, lambda *_: 0)


class Patched(Vllm031):
    """The adapter for a 0.31-0.33 tree with the patch applied."""

    handle_type: ClassVar[type[Handle]] = PatchedHandle
    requirements: ClassVar[tuple[Requirement, ...]] = (
        *SHARED_REQUIREMENTS,
        PREFILL_END,
        Requirement(f"Scheduler.{PROMOTION} (the findings' patch)", carries_patch),
    )
