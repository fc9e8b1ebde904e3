"""vLLM 0.34: the per-group margin of 0.32 ("fixed"), with parked loads' reservations cached.

What changed for the harness:
- ``ModelRunnerOutput`` lost ``req_id_to_index`` (the scheduler indexes ``req_ids`` itself);
- an async load parked while its KV arrives is no longer in ``_inflight_prefills``: its
  remaining blocks are cached in ``_parked_reservations`` (set when parked, refreshed at
  promotion), so a variant's reservation counts the loads of both.
The admission loop's new queue (``async_kv_waiting``), its loads-only mode and the
``max_num_inflight_kv_loads`` gate need no hook: the handle reads request states from
``Scheduler.requests``, and the gate is a scheduler setting (``engine:``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from vllm.v1.outputs import ModelRunnerOutput

from matrix.adapters.engine_loop import Worker
from matrix.adapters.handle import Handle
from matrix.adapters.requirements import SHARED_REQUIREMENTS, Requirement, required
from matrix.adapters.surface import PARKED_RESERVATIONS, RUNNER_OUTPUT_034
from matrix.adapters.v0_31 import PREFILL_END
from matrix.adapters.v0_32 import SPEC_STEP_ATTRIBUTE, Vllm032, Vllm032Handle


class Worker034(Worker):
    """The simulated runner, its output without ``req_id_to_index``; a preempted request
    comes back new, re-sent in full (its worker state was dropped at preemption)."""

    def resumes_as_new(self) -> bool:
        """0.34 sends every request the runner does not hold as new."""
        return True

    def model_output(
        self, request_ids: list[str], sampled: list[list[int]], connector_output: Any
    ) -> ModelRunnerOutput:
        """0.34's ``ModelRunnerOutput``: the scheduler indexes ``req_ids`` itself."""
        return ModelRunnerOutput(
            req_ids=request_ids, sampled_token_ids=sampled, kv_connector_output=connector_output
        )


class Vllm034Handle(Vllm032Handle):
    """A scheduler of 0.34: parked loads' reservations kept apart from the prefills'."""

    worker_type: ClassVar[type[Worker]] = Worker034

    def inflight_loads(self) -> Iterable[Any]:
        """The in-flight prefills and the parked async loads (each once)."""
        scheduler = self.scheduler
        return tuple(
            dict.fromkeys([*scheduler._inflight_prefills, *scheduler._parked_reservations])
        )


class Vllm034(Vllm032):
    """The adapter for vLLM 0.34."""

    handle_type: ClassVar[type[Handle]] = Vllm034Handle
    requirements: ClassVar[tuple[Requirement, ...]] = (
        *SHARED_REQUIREMENTS,
        PREFILL_END,
        SPEC_STEP_ATTRIBUTE,
        required(RUNNER_OUTPUT_034),
        required(PARKED_RESERVATIONS),
    )
