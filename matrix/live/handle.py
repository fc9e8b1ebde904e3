"""A live engine's scheduler as the harness's ``Handle``: the same class, the release's hooks
included, with only what a live engine does differently. Requests go through
``LLMEngine.add_request`` (the live prompt and sampling, NIXL's remote-prefill parameters as in
the harness), a step is ``LLMEngine.step()`` (``EngineCore``'s step or its batch queue, the
model runner's forward pass, the drafter, the connector's worker side), and loads are reported
by the test connector; the state, the block accounting, the reservation and the variants'
hooks are the harness's own, reading and patching the engine's scheduler instance.

:func:`live_handle_type` puts :class:`LiveHandle` in front of the release's handle class
(``VersionAdapter.handle_type``), so a variant is installed on the engine's scheduler by
exactly the code that installs it on the harness's.
"""

from __future__ import annotations

import functools
from typing import Any, cast

from vllm.sampling_params import SamplingParams

from matrix.adapters.handle import Handle
from matrix.adapters.protocol import StepOutcome
from matrix.live.connector import REPORTS
from matrix.live.engine import LiveEngine, live_sampling
from matrix.live.layout import live_tokens


class LiveHandle(Handle):
    """One pool of a live engine: a fresh scheduler, driven through the engine. Combined
    with a release's handle class by :func:`live_handle_type`."""

    def __init__(self, engine: LiveEngine, pool: int) -> None:
        self.live = engine
        self._track(engine.use_pool(pool))
        self.engine_ids: dict[str, str] = {}  # the case's request id -> the engine's
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

    def sampling_params(self, max_tokens: int) -> SamplingParams:
        """Greedy, of the one token the drafter proposes (see ``layout``)."""
        return live_sampling(max_tokens)

    def prompt_tokens(self, request_id: str, length: int) -> list[int]:
        """The live prompt: ends in a run of the sampled token (see ``layout``)."""
        return live_tokens(request_id, length)

    def submit(
        self, request_id: str, prompt: list[int], params: SamplingParams, priority: int = 0
    ) -> None:
        """Through the engine, which gives the request its own id."""
        self.engine_ids[request_id] = self.live.llm.add_request(
            request_id, {"prompt_token_ids": prompt}, params, priority=priority
        )

    def scheduler_request_id(self, request_id: str) -> str:
        """The engine's id of the case's request (its own, before the engine has it)."""
        return self.engine_ids.get(request_id, request_id)

    def load_reported(self, request_id: str) -> bool:
        """Whether the test connector's worker side has reported the load."""
        return self.engine_ids[request_id] in REPORTS.reported

    def step(
        self, finished_loads: set[str], failed_loads: frozenset[str] = frozenset()
    ) -> StepOutcome:
        """One engine step; the connector's worker side reports these loads finished."""
        if failed_loads:
            raise ValueError("the live connector reports no failed load")
        REPORTS.due |= {self.engine_ids[request_id] for request_id in finished_loads}
        self._scheduled, self._free_while_running = {}, None
        self.live.llm.step()
        free = self._free_while_running
        if free is None:  # the batch queue was full: nothing scheduled this step
            free = self.scheduler.kv_cache_manager.block_pool.get_num_free_blocks()
        case_ids = {engine_id: case_id for case_id, engine_id in self.engine_ids.items()}
        return StepOutcome({case_ids[r]: n for r, n in self._scheduled.items()}, free)

    def keep_arrived(self, request_ids: list[str], blocks: int) -> None:
        """Never asked: a live case has no failed load (matrix/live/layout.py)."""
        raise ValueError("the live connector reports no failed load")

    def abort(self, request_ids: list[str]) -> None:
        """Aborts through the engine, as a client going away does."""
        self.live.llm.abort_request([self.engine_ids[r] for r in request_ids], internal=True)

    def settled(self) -> bool:
        """Nothing left that could free blocks, and the worker has heard of every finish."""
        scheduler = self.scheduler
        return not (
            scheduler.has_requests() or self.live.core.batch_queue or scheduler.deferred_frees
        )

    def finish(self) -> bool:
        """Drains the engine after the run (see ``LiveEngine.drain``); whether it is clean."""
        return self.live.drain(list(self.engine_ids.values()))


@functools.cache
def live_handle_type(release: type[Handle]) -> type[LiveHandle]:
    """:class:`LiveHandle` in front of ``release`` (the adapter's handle class): the live
    engine's parts, then the release's hooks (``stock_margin``, ``drop_stock_margin``,
    ``coordinator_options``), then what every release shares; one class per release class."""
    combined = type(f"Live{release.__name__}", (LiveHandle, release), {})
    return cast(type[LiveHandle], combined)
