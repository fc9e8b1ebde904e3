"""One real scheduler for one case and pool size, driven as an engine would: requests added
with NIXL's remote-prefill parameters, stepped by the engine loop of ``engine`` (the model
output simulated: a token sampled, the case's drafts accepted; loads reported done or failed
through the connector output), aborted as the engine aborts, its blocks accounted.

:class:`Handle` is what every release shares; its async-load reservation, and the hooks there
that releases changed (each release's module, ``v0_30`` ..., implements them), are in
``reservation``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Self

from vllm.sampling_params import SamplingParams
from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import KVCacheConfig, MambaSpec
from vllm.v1.request import Request, RequestStatus
from vllm.v1.structured_output import StructuredOutputManager

from matrix.adapters.accounting import block_account, blocks_by_group, group_labels
from matrix.adapters.blueprint import blueprint
from matrix.adapters.config import retention_setting
from matrix.adapters.connectors import family_of
from matrix.adapters.connectors.base import ConnectorSide
from matrix.adapters.connectors.prefill import PrefillSide
from matrix.adapters.connectors.warm import metadata_tensors, warm_tier
from matrix.adapters.engine_loop import EngineLoop, Worker
from matrix.adapters.engine_options import model_runner
from matrix.adapters.protocol import (
    BlockAccount,
    Geometry,
    GroupGeometry,
    ProtocolViolation,
    SchedulerState,
    StepOutcome,
)
from matrix.adapters.requests import STATUS_WORDS, distinct_prompt
from matrix.adapters.reservation import Reservation
from matrix.adapters.snapshots import StateReader
from matrix.case.format import CaseFile
from matrix.case.parts import RequestSpec


class Handle(Reservation):
    """One real scheduler built for one case and pool size, and the simulated engine around
    it; the reservation's release-specific hooks (:class:`Reservation`) are implemented by each
    release's module."""

    side: ConnectorSide  # the connector's worker side, and what its tier holds
    worker_type: ClassVar[type[Worker]] = Worker  # the simulated runner, as the release takes it
    # Why the tier holds less than the case says in this pool (the adapter's build tells), "".
    tier_unfilled = ""

    def __init__(self, case: CaseFile, pool: int) -> None:
        plan = blueprint(case)
        config = plan.config
        config.cache_config.num_gpu_blocks = pool
        family = family_of(case)
        groups = list(plan.groups)
        block_bytes = family.tensor_block_bytes()
        tensors = metadata_tensors(groups, pool, block_bytes) if block_bytes else []
        # The engine's planner copies the retention interval from its cache config, whose
        # default is 0; unset, the harness keeps KVCacheConfig's own default (None: every
        # block's checkpoint kept), as every release's verdicts were recorded with. Moving to 0
        # changes tier connectors' hits (docs/cases.md, engine keys): not yet re-recorded.
        kv_cache_config = KVCacheConfig(
            num_blocks=pool,
            kv_cache_tensors=tensors,
            kv_cache_groups=groups,
            **retention_setting(case),
        )
        # The engine's choice of scheduler class (EngineCore picks it from the same setting).
        scheduler_class = AsyncScheduler if config.scheduler_config.async_scheduling else Scheduler
        with model_runner(case.engine.model_runner):
            scheduler = scheduler_class(
                config,
                kv_cache_config,
                StructuredOutputManager(config),
                block_size=plan.block_size,
                hash_block_size=plan.hash_block_size,
                log_stats=False,
            )
        self._track(scheduler)
        self._block_hasher = plan.block_hasher
        self.side = family.attach(self.scheduler.connector, self.scheduler, case)
        speculative = case.speculative
        self.worker = self.worker_type(
            self.scheduler, speculative.accept if speculative else "all", self.side
        )
        self.engine = EngineLoop(self.scheduler, self.worker, config.max_concurrent_batches)
        # Why a request that warms the tier could not run to its end in this pool, or "".
        self.warming_cut = warm_tier(self, case.requests, pool)

    @classmethod
    def adopt(cls, scheduler: Any) -> Self:
        """A handle on a scheduler built elsewhere (by vLLM's own tests: ``python -m matrix
        upstream``), for a variant's ``geometry`` and ``install_reservation``; it drives no
        engine, so the engine's methods are not for it."""
        handle = cls.__new__(cls)
        handle._track(scheduler)
        return handle

    def _track(self, scheduler: Any) -> None:
        """Drives ``scheduler``: no request added yet."""
        self.scheduler: Any = scheduler
        # NIXL's side (no tier, no pins) until a case's connector is attached.
        self.side = PrefillSide(scheduler, getattr(scheduler, "connector", None), {})
        self._known: list[str] = []  # the case's request ids, in the order added
        self._arrivals = 0  # requests made so far: the next one's arrival time
        self._prompts: dict[str, list[int]] = {}
        self._reader = StateReader(STATUS_WORDS)

    def geometry(self) -> Geometry:
        """What a reservation rule needs of this scheduler: block sizes, groups and spec step."""
        scheduler = self.scheduler
        spec_tokens, lookahead = scheduler.num_spec_tokens, scheduler.num_lookahead_tokens
        managers = scheduler.kv_cache_manager.coordinator.single_type_managers
        return Geometry(
            spec_step_tokens=1 + spec_tokens + lookahead if spec_tokens else 0,
            scheduler_block_size=scheduler.block_size,
            groups=tuple(
                GroupGeometry(m.block_size, isinstance(m.kv_cache_spec, MambaSpec))
                for m in managers
            ),
            num_lookahead_tokens=lookahead,
        )

    def add_request(self, spec: RequestSpec) -> None:
        """Adds the request as the engine would, with the connector's parameters if it loads
        from a prefill instance (NIXL's remote prefill)."""
        params = self.sampling_params(spec.max_tokens)
        if spec.skip_reading_prefix_cache:  # read when the request is built
            params.skip_reading_prefix_cache = True
        transfer = self.side.transfer_params(spec)
        if transfer is not None:
            params.extra_args = {"kv_transfer_params": transfer}
        prompt = self.prompt_of(spec)
        self._prompts[spec.id] = prompt
        self.submit(spec.id, prompt, params, spec.priority)
        self._known.append(spec.id)

    def prompt_of(self, spec: RequestSpec) -> list[int]:
        """The request's prompt tokens, its shared prefix copied in."""
        prompt = self.prompt_tokens(spec.id, spec.prompt_tokens())
        if spec.prefix is not None:
            # Alone (as when the fit is measured) the request keeps the same tokens.
            of = self._prompts.get(spec.prefix.of) or self.prompt_tokens(
                spec.prefix.of, spec.prompt_tokens()
            )
            prompt[: spec.prefix.tokens] = of[: spec.prefix.tokens]
        return prompt

    def request_of(
        self, request_id: str, prompt: list[int], params: SamplingParams, priority: int = 0
    ) -> Request:
        """vLLM's request, as ``EngineCore`` makes it (its block hashes computed), arriving
        after every request made before it: the scheduler orders queues by arrival time (0.34
        picks between its two waiting queues by it), and the wall clock may give two requests
        one time, so the harness counts arrivals instead."""
        self._arrivals += 1
        return Request(
            request_id=request_id,
            prompt_token_ids=prompt,
            sampling_params=params,
            pooling_params=None,
            arrival_time=float(self._arrivals),
            priority=priority,
            block_hasher=self._block_hasher,
        )

    # How requests reach the scheduler and how their loads are heard of: the simulated
    # engine's; a live engine's handle (matrix/live/handle.py) overrides these.

    def sampling_params(self, max_tokens: int) -> SamplingParams:
        """A request's sampling: ``max_tokens`` tokens, whatever they are."""
        return SamplingParams(max_tokens=max_tokens, ignore_eos=True)

    def prompt_tokens(self, request_id: str, length: int) -> list[int]:
        """A request's own prompt (before any shared prefix is copied in)."""
        return distinct_prompt(request_id, length)

    def submit(
        self, request_id: str, prompt: list[int], params: SamplingParams, priority: int = 0
    ) -> None:
        """Hands the request to the scheduler, as ``EngineCore.add_request`` does."""
        self.scheduler.add_request(self.request_of(request_id, prompt, params, priority))

    def scheduler_request_id(self, request_id: str) -> str:
        """The id the scheduler knows the case's request by."""
        return request_id

    def load_reported(self, request_id: str) -> bool:
        """Whether the worker has reported the request's load (finished or failed); a load
        again after a preemption (from a connector's tier) is a new one."""
        worker = self.worker
        if request_id in worker.preempted_after_report:
            request = self._request_of(request_id)
            loading = request is not None and request.status == RequestStatus.WAITING_FOR_REMOTE_KVS
            return worker.load_reported(request_id, loading)
        return request_id in worker.reported

    def step(
        self, finished_loads: set[str], failed_loads: frozenset[str] = frozenset()
    ) -> StepOutcome:
        """One engine step; the worker reports these loads finished or failed. Where vLLM
        raises after a batch its runner would have refused, :class:`ProtocolViolation` says
        so, the error its cause."""
        try:
            return self.engine.step(set(finished_loads), set(failed_loads))
        except Exception as error:
            if self.worker.violation:
                raise ProtocolViolation(self.worker.violation) from error
            raise

    def keep_arrived(self, request_ids: list[str], blocks: int) -> None:
        """The first ``blocks`` blocks of these loads arrived before they fail: the worker
        names only the rest invalid, where its connector reports failures by block (NIXL and
        the P/D connectors, the Mooncake store; the other tiers' workers fail a load whole)."""
        arrived = getattr(self.side, "arrived", None)
        if arrived is None:
            raise ValueError(f"{type(self.side).__name__} reports a failed load whole")
        for request_id in request_ids:
            arrived[self.scheduler_request_id(request_id)] = blocks

    def abort(self, request_ids: list[str]) -> None:
        """What ``EngineCore.abort_requests`` does when a client goes away."""
        self.scheduler.finish_requests(request_ids, RequestStatus.FINISHED_ABORTED)

    def accounting(self) -> BlockAccount:
        """Where every block of the pool is now (the connector's pins among the held)."""
        return block_account(self.scheduler, self.side.pinned())

    def blocks_held(self, request_ids: Sequence[str]) -> tuple[tuple[int, ...], ...]:
        """Each KV cache group's blocks per request, now (for a picture)."""
        return blocks_by_group(self.scheduler, [self.scheduler_request_id(r) for r in request_ids])

    def group_labels(self) -> tuple[str, ...]:
        """Each KV cache group in words, for a picture."""
        return group_labels(self.scheduler)

    def settled(self) -> bool:
        """No request, batch, deferred free or connector work (a store the worker has not
        reported, a block the connector references) is left that could still return
        blocks."""
        scheduler = self.scheduler
        return not (
            scheduler.requests
            or self.engine.batch_queue
            or scheduler.deferred_frees
            or self.side.busy()
            or self.side.pinned()
        )

    def connector_busy(self) -> bool:
        """Whether the connector's worker still owes a report (a store) that can free blocks."""
        return self.side.busy() or bool(self.side.pinned())

    def state(self) -> SchedulerState:
        """Every request the case added (finished once it left) and the free blocks."""
        scheduler = self.scheduler
        free = scheduler.kv_cache_manager.block_pool.get_num_free_blocks()
        return self._reader.read(self._known, self._request_of, self.load_reported, free)

    def _request_of(self, request_id: str) -> Any:
        """vLLM's request for the case's, or None once it left the scheduler."""
        return self.scheduler.requests.get(self.scheduler_request_id(request_id))
