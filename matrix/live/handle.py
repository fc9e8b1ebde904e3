"""A live engine's scheduler as the harness's ``SchedulerHandle``: requests go through
``LLMEngine.add_request`` (NIXL's remote-prefill parameters, as in the harness), a step is
``LLMEngine.step()`` (``EngineCore``'s step or its batch queue, the model runner's forward pass,
the drafter, the connector's worker side), and the state, the block accounting and the
variants' hooks read and patch the engine's own scheduler instance.

The variants reach the scheduler through the release's handle class (``VersionAdapter``'s
``handle_type``), whose reservation hooks read nothing but ``scheduler``: a variant is
installed on the engine's scheduler exactly as on the harness's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matrix.adapters.accounting import block_account, blocks_by_group, group_labels
from matrix.adapters.handle import Handle, remote_prefill, status_of
from matrix.adapters.protocol import (
    FINISHED,
    BlockAccount,
    Geometry,
    RequestState,
    SchedulerState,
    StepOutcome,
)
from matrix.case.parts import RequestSpec
from matrix.live.connector import REPORTS
from matrix.live.engine import LiveEngine, live_sampling
from matrix.live.layout import live_prompt


def release_view(handle_type: type[Handle], scheduler: Any) -> Handle:
    """The release's handle over ``scheduler``, for its reservation hooks (geometry, the
    stock margin, installing a variant), without building a scheduler of its own."""
    view = handle_type.__new__(handle_type)
    view.scheduler = scheduler
    return view


class LiveHandle:
    """One pool of a live engine: a fresh scheduler, driven through the engine."""

    def __init__(self, engine: LiveEngine, handle_type: type[Handle], pool: int) -> None:
        self.engine = engine
        self.scheduler = engine.use_pool(pool)
        self.release = release_view(handle_type, self.scheduler)
        self.engine_ids: dict[str, str] = {}  # the case's request id -> the engine's
        self._prompts: dict[str, list[int]] = {}
        self._scheduled: dict[str, int] = {}
        self._free_while_running: int | None = None
        self._observe_schedule()

    def _observe_schedule(self) -> None:
        """Reads what each ``schedule()`` scheduled and the free blocks right after it (where
        usage peaks, as the harness reads it), on this instance only."""
        schedule = self.scheduler.schedule
        pool = self.scheduler.kv_cache_manager.block_pool

        def observed(*args: Any, **kwargs: Any) -> Any:
            output = schedule(*args, **kwargs)
            self._scheduled = dict(output.num_scheduled_tokens)
            self._free_while_running = pool.get_num_free_blocks()
            return output

        self.scheduler.schedule = observed

    def geometry(self) -> Geometry:
        """The engine scheduler's geometry, as the release's handle reads it."""
        return self.release.geometry()

    def install_reservation(self, *args: Any, **kwargs: Any) -> None:
        """Installs a variant on the engine's scheduler: the release's handle's own
        ``install_reservation`` (see ``SchedulerHandle``), whatever its arguments."""
        self.release.install_reservation(*args, **kwargs)

    def reservation(self) -> int:
        """What an async-load admission keeps free now, as the release's handle reads it."""
        return self.release.reservation()

    def add_request(self, spec: RequestSpec) -> None:
        """Adds the request through the engine: the live prompt, greedy sampling of the one
        token the drafter proposes, NIXL's remote-prefill parameters if it loads."""
        params = live_sampling(spec.max_tokens)
        if spec.async_load:
            params.extra_args = {
                "kv_transfer_params": remote_prefill(spec.id, spec.prompt_tokens())
            }
        prompt = live_prompt(spec, self._prompts)
        self._prompts[spec.id] = prompt
        self.engine_ids[spec.id] = self.engine.llm.add_request(
            spec.id, {"prompt_token_ids": prompt}, params
        )

    def step(
        self, finished_loads: set[str], failed_loads: frozenset[str] = frozenset()
    ) -> StepOutcome:
        """One engine step; the connector's worker side reports these loads finished."""
        if failed_loads:
            raise ValueError("the live connector reports no failed load")
        REPORTS.due |= {self.engine_ids[request_id] for request_id in finished_loads}
        self._scheduled, self._free_while_running = {}, None
        self.engine.llm.step()
        free = self._free_while_running
        if free is None:  # the batch queue was full: nothing scheduled this step
            free = self.scheduler.kv_cache_manager.block_pool.get_num_free_blocks()
        case_ids = {engine_id: case_id for case_id, engine_id in self.engine_ids.items()}
        return StepOutcome({case_ids[r]: n for r, n in self._scheduled.items()}, free)

    def abort(self, request_ids: list[str]) -> None:
        """Aborts through the engine, as a client going away does."""
        self.engine.llm.abort_request([self.engine_ids[r] for r in request_ids], internal=True)

    def accounting(self) -> BlockAccount:
        """Where every block of the engine scheduler's pool is now."""
        return block_account(self.scheduler)

    def blocks_held(self, request_ids: Sequence[str]) -> tuple[tuple[int, ...], ...]:
        """Each KV cache group's blocks per request, now (for a picture)."""
        return blocks_by_group(self.scheduler, [self.engine_ids.get(r, r) for r in request_ids])

    def group_labels(self) -> tuple[str, ...]:
        """Each KV cache group in words, for a picture."""
        return group_labels(self.scheduler)

    def settled(self) -> bool:
        """Nothing left that could free blocks, and the worker has heard of every finish."""
        scheduler = self.scheduler
        return not (
            scheduler.has_requests() or self.engine.core.batch_queue or scheduler.deferred_frees
        )

    def state(self) -> SchedulerState:
        """Every request the case added, by the case's ids, and the free blocks."""
        scheduler = self.scheduler
        requests = []
        for case_id, engine_id in self.engine_ids.items():
            reported = engine_id in REPORTS.reported
            request = scheduler.requests.get(engine_id)
            if request is None:
                requests.append(RequestState(case_id, FINISHED, 0, reported, 0))
                continue
            requests.append(
                RequestState(
                    case_id,
                    status_of(request.status),
                    request.num_computed_tokens,
                    reported,
                    request.num_preemptions,
                )
            )
        return SchedulerState(
            tuple(requests), scheduler.kv_cache_manager.block_pool.get_num_free_blocks()
        )

    def finish(self) -> bool:
        """Drains the engine after the run (see ``LiveEngine.drain``); whether it is clean."""
        return self.engine.drain(list(self.engine_ids.values()))
