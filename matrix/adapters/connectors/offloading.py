"""``OffloadingConnector`` (vLLM's native CPU offload): its scheduler side and its real
``CPUOffloadingManager`` are vLLM's; the harness is its worker. Loads and stores are jobs
issued in the step's ``OffloadingConnectorMetadata``; the worker reports a load as the
request's ``finished_recving`` *and* its job in ``OffloadingWorkerMetadata.completed_jobs``
(the connector frees a job only on the second), a store job ``complete_store_after`` steps
after it was issued, a flushed job at once, and a synchronous load in its own step. The
worker asserts every transfer succeeds: there is no load-failure path.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.offloading.common import (
    OffloadingConnectorMetadata,
    OffloadingWorkerMetadata,
)
from vllm.v1.outputs import KVConnectorOutput

from matrix.adapters.connectors.base import ConnectorSide, StoreReports, store_delays
from matrix.adapters.connectors.tier import TierSide, tier_unsupported
from matrix.case.format import CaseFile

# The CPU tier's size: ample (vLLM counts chunks lazily; nothing is allocated for it here),
# so no case's stores evict each other.
CPU_BYTES = 1 << 40


class OffloadingSide(TierSide):
    """One scheduler's ``OffloadingConnector``, its worker simulated."""

    def __init__(self, case: CaseFile) -> None:
        super().__init__(case)
        self.stores = StoreReports(store_delays(case))
        self.loads: defaultdict[str, set[int]] = defaultdict(set)  # request -> its load jobs
        self.now: set[int] = set()  # jobs done within this step (sync loads, flushes)

    def report(self, output: Any, finished: set[str], failed: set[str]) -> KVConnectorOutput | None:
        """Finished loads with their jobs, the stores due, and what completed in the step."""
        meta = output.kv_connector_metadata
        completed = {job for request in finished for job in self.loads.pop(request, ())}
        completed |= set(self.stores.take_due())
        if isinstance(meta, OffloadingConnectorMetadata):
            self._observe(meta)
        completed |= self.now
        self.now = set()
        self.stores.step += 1
        if not completed and not finished:
            return None
        return KVConnectorOutput(
            finished_recving=set(finished),
            kv_connector_worker_meta=OffloadingWorkerMetadata(
                completed_jobs=dict.fromkeys(sorted(completed), 1)
            ),
        )

    def _observe(self, meta: OffloadingConnectorMetadata) -> None:
        for job_id, job in meta.load_jobs.items():
            if getattr(
                job, "sync", False
            ):  # (0.33) loaded before this step's forward pass: no finished_recving
                self.now.add(job_id)
            else:
                self.loads[job.req_id].add(job_id)
        flushed = set(meta.jobs_to_flush or ())
        for job_id, job in meta.store_jobs.items():
            if job_id in flushed:
                self.now.add(job_id)
            else:
                self.stores.issue(job_id, (job.req_id,))
        # A flush waits for every job it names that an earlier step issued.
        for job_id in flushed - set(meta.store_jobs):
            self.stores.finish_now(job_id)

    def busy(self) -> bool:
        """Stores not reported yet (the connector keeps the engine stepping for them)."""
        return self.stores.pending()

    def hold_stores(self, delay: int | None) -> None:
        """Holds the store reports (None), or releases them ``delay`` steps from now."""
        if delay is None:
            self.stores.held = True
        else:
            self.stores.release(delay)


@dataclass(frozen=True)
class Offloading:
    """``OffloadingConnector`` with vLLM's CPU spec."""

    name: str = "offloading"

    def transfer_config(self, case: CaseFile) -> dict[str, Any]:
        """Both roles (it stores what runs, loads what is stored); its chunking options."""
        options = case.connector_options
        extra: dict[str, Any] = {"cpu_bytes_to_use": CPU_BYTES}
        for key in ("block_size", "blocks_per_chunk", "sync_load_budget_bytes"):
            value = getattr(options, key)
            if value is not None:
                extra[key] = value
        return {
            "kv_connector": "OffloadingConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": extra,
        }

    def unsupported(self, case: CaseFile) -> str | None:
        """No Mamba ``none`` (it asserts prefix caching); no load-failure path."""
        if any(g.kind == "mamba" and g.mamba_mode == "none" for g in case.groups):
            return (
                "OffloadingConnector cannot be built with Mamba 'none' (prefix caching off): "
                "its config asserts every group's block is a multiple of the hash block"
            )
        return tier_unsupported(
            case, "OffloadingConnector", "its worker asserts every transfer succeeds"
        )

    def tensor_block_bytes(self) -> int:
        """0: it sizes its CPU pool from the groups' pages."""
        return 0

    def attach(self, connector: Any, scheduler: Any, case: CaseFile) -> ConnectorSide:
        """The simulated worker of this scheduler's connector."""
        return OffloadingSide(case)
