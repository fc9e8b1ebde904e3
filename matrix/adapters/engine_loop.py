"""The two simulated parts around a real scheduler, and the engine loop between them.

:class:`Worker` stands for the model runner and the connector's worker side: for a scheduled
batch it returns the output a GPU worker would (a token per request that reached the end of
its prompt, the accepted drafts, and the connector's report: the loads that finished or
failed, the stores and jobs done, ``connectors/``). :class:`EngineLoop` calls
the scheduler as ``EngineCore`` does: ``step`` for the synchronous scheduler, and
``step_with_batch_queue`` (``max_concurrent_batches`` deep, each batch's output processed one
call later) for ``AsyncScheduler``. Everything else is vLLM's own code.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Any

from vllm.v1.outputs import DraftTokenIds, ModelRunnerOutput

from matrix.adapters.connectors.base import ConnectorSide
from matrix.adapters.protocol import StepOutcome
from matrix.adapters.runner_protocol import RunnerProtocol
from matrix.case.engine import Accept, accepted_drafts

SAMPLED_TOKEN = 7
DRAFT_TOKEN = 11


class Worker:
    """What the GPU side returns for a batch, computed when the batch is executed."""

    def __init__(self, scheduler: Any, accept: Accept, side: ConnectorSide) -> None:
        self.scheduler = scheduler
        self.accept = accept
        self.side = side  # the connector's worker side
        # Per request: the steps that verified drafts.
        self.verify_steps: defaultdict[str, int] = defaultdict(int)
        self.reported: set[str] = set()  # loads reported finished or failed
        # Reported, then preempted: a tier connector may load the request again.
        self.preempted_after_report: set[str] = set()
        # What a real runner would refuse in the last batch ("" when nothing).
        self.protocol = RunnerProtocol(scheduler, self.resumes_as_new())
        self.violation = ""

    def resumes_as_new(self) -> bool:
        """Whether a preempted request comes back as a new one (the V2 runner's way; the V1
        runner takes it as cached and resumed)."""
        return bool(getattr(self.scheduler, "use_v2_model_runner", False))

    def execute(
        self, output: Any, finished_loads: set[str], failed_loads: set[str]
    ) -> ModelRunnerOutput:
        """The model output for a batch; the connector output reports these loads done or failed."""
        self.violation = self.protocol.check(output)
        request_ids = list(output.num_scheduled_tokens)
        sampled = [self._sampled(request_id, output) for request_id in request_ids]
        self.reported |= finished_loads | failed_loads
        self.protocol.reported(finished_loads, failed_loads, getattr(self.side, "arrived", {}))
        preempted = getattr(output, "preempted_req_ids", None) or ()
        self.preempted_after_report |= self.reported.intersection(preempted)
        return self.model_output(
            request_ids, sampled, self.side.report(output, finished_loads, failed_loads)
        )

    def model_output(
        self, request_ids: list[str], sampled: list[list[int]], connector_output: Any
    ) -> ModelRunnerOutput:
        """The runner's output as this release's ``ModelRunnerOutput`` takes it (with the
        ``req_id_to_index`` 0.30-0.33 read; 0.34's adapter drops it)."""
        return ModelRunnerOutput(
            req_ids=request_ids,
            req_id_to_index={r: i for i, r in enumerate(request_ids)},
            sampled_token_ids=sampled,
            kv_connector_output=connector_output,
        )

    def _sampled(self, request_id: str, output: Any) -> list[int]:
        request = self.scheduler.requests[request_id]
        # A prompt chunk that does not reach the prompt's end samples nothing.
        if request.is_prefill_chunk:
            return []
        drafts = len(output.scheduled_spec_decode_tokens.get(request_id, ()))
        accepted = drafts
        if drafts:
            accepted = accepted_drafts(self.accept, self.verify_steps[request_id], drafts)
            self.verify_steps[request_id] += 1
        # Fewer tokens than drafts + 1: the scheduler's own rejection path rolls back the rest.
        return [SAMPLED_TOKEN] * (1 + accepted)

    def load_reported(self, request_id: str, loading: bool) -> bool:
        """Whether the request's current load has been reported: a request preempted after
        its load was reported that is loading again (from a connector's tier) owes a new
        report."""
        if loading and request_id in self.preempted_after_report:
            self.preempted_after_report.discard(request_id)
            self.reported.discard(request_id)
        return request_id in self.reported

    def propose_drafts(self) -> None:
        """The drafter's proposals for every running request (synchronous engines only: with
        async scheduling the worker keeps the drafts and the scheduler uses placeholders)."""
        scheduler = self.scheduler
        running = [r.request_id for r in scheduler.running]
        if scheduler.num_spec_tokens and running:
            drafts = [[DRAFT_TOKEN] * scheduler.num_spec_tokens for _ in running]
            scheduler.update_draft_token_ids(DraftTokenIds(running, drafts))


class EngineLoop:
    """One ``EngineCore`` step per call, synchronous or with the batch queue."""

    def __init__(self, scheduler: Any, worker: Worker, batch_queue_size: int) -> None:
        self.scheduler = scheduler
        self.worker = worker
        self.batch_queue_size = batch_queue_size
        self.batch_queue: deque[tuple[Any, ModelRunnerOutput]] = deque()

    def step(self, finished_loads: set[str], failed_loads: set[str]) -> StepOutcome:
        """One ``EngineCore`` step, these loads reported done or failed; returns what ran."""
        if self.batch_queue_size > 1:
            return self._step_with_batch_queue(finished_loads, failed_loads)
        scheduler = self.scheduler
        output = scheduler.schedule()
        free_while_running = scheduler.kv_cache_manager.block_pool.get_num_free_blocks()
        scheduler.update_from_output(
            output, self.worker.execute(output, finished_loads, failed_loads)
        )
        self.worker.propose_drafts()
        return StepOutcome(
            dict(output.num_scheduled_tokens), free_while_running, self.worker.violation
        )

    def _step_with_batch_queue(
        self, finished_loads: set[str], failed_loads: set[str]
    ) -> StepOutcome:
        scheduler = self.scheduler
        pool = scheduler.kv_cache_manager.block_pool
        scheduled: dict[str, int] = {}
        free_while_running = pool.get_num_free_blocks()
        violation = ""
        if scheduler.has_requests():
            output = scheduler.schedule()
            free_while_running = pool.get_num_free_blocks()
            scheduled = dict(output.num_scheduled_tokens)
            self.batch_queue.appendleft(
                (output, self.worker.execute(output, finished_loads, failed_loads))
            )
            violation = self.worker.violation
            executed = output.total_num_scheduled_tokens > 0
            if len(self.batch_queue) < self.batch_queue_size and (
                executed or scheduler.has_requests()
            ):
                return StepOutcome(scheduled, free_while_running, violation)
        elif not self.batch_queue:
            return StepOutcome(scheduled, free_while_running)
        output, model_output = self.batch_queue.pop()
        scheduler.update_from_output(output, model_output)
        return StepOutcome(scheduled, free_while_running, violation)
