"""A handle's async-load reservation: what an admission keeps free for the loads in flight,
each load's remaining blocks counted by vLLM's coordinator, and a variant's rule installed on
the one scheduler instance in its place. The hooks at the end are what releases changed; each
release's handle (``v0_30`` ...) implements them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from matrix.adapters.admission import admission_need

# A margin of the admitting request: from the request and its ``allocate_slots`` arguments.
AdmissionMargin = Callable[[Any, Mapping[str, Any]], int]


class Reservation:
    """The reservation part of :class:`matrix.adapters.handle.Handle`, on its ``scheduler``."""

    scheduler: Any  # vLLM's scheduler, set by the handle

    def reservation(self) -> int:
        """What an async-load admission keeps free now (see ``SchedulerHandle.reservation``)."""
        return int(self.scheduler._inflight_prefill_reserved_blocks()) + self.stock_margin()

    def remaining_blocks(self, request: Any, spec_tokens_through_coordinator: bool) -> int:
        """Blocks an in-flight load still needs to hold its whole sequence; with
        ``spec_tokens_through_coordinator``, also its first speculative step (0.32's rule)."""
        scheduler = self.scheduler
        full = min(request.num_tokens, scheduler.max_model_len)
        num_tokens = full
        if spec_tokens_through_coordinator and scheduler.num_spec_tokens:
            num_tokens += 1 + scheduler.num_spec_tokens + scheduler.num_lookahead_tokens
        manager = scheduler.kv_cache_manager
        blocks: int = manager.coordinator.get_num_blocks_to_allocate(
            request_id=request.request_id,
            num_tokens=num_tokens,
            new_computed_blocks=manager.empty_kv_cache_blocks.blocks,
            num_encoder_tokens=0,
            total_computed_tokens=request.num_computed_tokens,
            num_local_computed_tokens=request.num_computed_tokens,
            num_tokens_main_model=full,
            apply_admission_cap=True,
            **self.coordinator_options(request),
        )
        return blocks

    def install_reservation(
        self,
        admission_margin: int,
        per_request_margin: int,
        spec_tokens_through_coordinator: bool,
        admission_margin_for: Callable[[int], int] | None = None,
        admission_need_per_group: bool = False,
    ) -> None:
        """Replaces this instance's async-load reservation (see ``SchedulerHandle``'s)."""
        scheduler = self.scheduler

        def reserved_for_inflight_loads() -> int:
            inflight = sum(
                self.remaining_blocks(request, spec_tokens_through_coordinator) + per_request_margin
                for request in self.inflight_loads()
            )
            return inflight + admission_margin

        # Instance attributes shadow the class's, so only this scheduler sees the variant.
        self.drop_stock_margin()
        scheduler._inflight_prefill_reserved_blocks = reserved_for_inflight_loads
        margins: list[AdmissionMargin] = []
        if admission_margin_for is not None:
            margin_for = admission_margin_for
            margins.append(lambda request, allocation: margin_for(request.num_tokens))
        if admission_need_per_group:
            margins.append(
                lambda request, allocation: admission_need(
                    scheduler, request, allocation, self.coordinator_options(request)
                )
            )
        if margins:
            self._reserve_per_admission(margins)

    def _reserve_per_admission(self, margins: list[AdmissionMargin]) -> None:
        """Adds each margin of the admitting request to an async-load admission's reservation:
        the scheduler computes the reservation without the admitting request, and hands both
        to ``allocate_slots``, an async load with ``delay_cache_blocks`` set."""
        manager = self.scheduler.kv_cache_manager
        allocate = manager.allocate_slots

        def allocate_slots(request: Any, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("delay_cache_blocks"):
                reserved = kwargs.get("reserved_blocks", 0)
                kwargs["reserved_blocks"] = reserved + sum(m(request, kwargs) for m in margins)
            return allocate(request, *args, **kwargs)

        manager.allocate_slots = allocate_slots

    # What releases changed; each release's module implements these.

    def stock_margin(self) -> int:
        """Blocks the stock admission keeps free for the admitting request's speculative step."""
        raise NotImplementedError

    def drop_stock_margin(self) -> None:
        """Turn the stock margin off on this instance, so a variant's own margin replaces it."""
        raise NotImplementedError

    def coordinator_options(self, request: Any) -> dict[str, Any]:
        """Release-specific arguments of ``get_num_blocks_to_allocate``."""
        raise NotImplementedError

    def inflight_loads(self) -> Iterable[Any]:
        """The requests whose remaining blocks the reservation counts: vLLM's in-flight
        prefills (0.34 keeps its parked loads apart)."""
        return tuple(self.scheduler._inflight_prefills)
