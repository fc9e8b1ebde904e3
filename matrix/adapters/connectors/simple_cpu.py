"""``SimpleCPUOffloadConnector``: its scheduler side and its CPU tier (a ``BlockPool`` and a
KV cache coordinator over the same groups) are vLLM's; the harness is its worker. A load is
the step's ``load_event``, reported as the request's ``finished_recving``; a store is the
step's ``store_event``, reported in ``SimpleCPUOffloadWorkerMetadata.completed_store_events``
``complete_store_after`` steps later (at once when a preemption flushes them). Its worker
reports no failed load. It references the GPU blocks of a load and of a store until they
complete (counted by ``PinCounter``), and turns itself off without prefix caching.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vllm.v1.outputs import KVConnectorOutput
from vllm.v1.simple_kv_offload.metadata import (
    SimpleCPUOffloadMetadata,
    SimpleCPUOffloadWorkerMetadata,
)

from matrix.adapters.connectors.base import (
    ConnectorSide,
    StoreReports,
    bind_counted_pool,
    store_delays,
)
from matrix.adapters.connectors.tier import TierSide, tier_unsupported
from matrix.case.format import CaseFile

# The case's group kinds vLLM builds as a FullAttentionSpec (MLA's spec is one).
FULL_ATTENTION_KINDS = frozenset({"full", "mla"})
# The CPU tier's blocks (vLLM builds a block pool of them per scheduler): ample for every
# shipped case's stores, small enough to build in milliseconds.
CPU_BLOCKS = 4096
CPU_BYTES = 1 << 40
# The metadata tensor's bytes per GPU block: the CPU bytes over them are CPU_BLOCKS (0.30-0.32
# size the tier from that ratio; 0.33 also takes num_cpu_blocks, at most that ratio).
TENSOR_BLOCK_BYTES = CPU_BYTES // CPU_BLOCKS


class SimpleCPUSide(TierSide):
    """One scheduler's ``SimpleCPUOffloadConnector``, its worker simulated."""

    def __init__(self, case: CaseFile, connector: Any, scheduler: Any) -> None:
        super().__init__(case)
        self.stores = StoreReports(store_delays(case))
        self.manager = connector.scheduler_manager
        # The connector reaches the GPU pool through its manager, bound at start-up.
        self.counter = bind_counted_pool(connector, scheduler)

    def report(self, output: Any, finished: set[str], failed: set[str]) -> KVConnectorOutput | None:
        """Finished loads, and the store events due."""
        meta = output.kv_connector_metadata
        if isinstance(meta, SimpleCPUOffloadMetadata):
            if meta.need_flush:  # a preemption: the worker waits for every transfer
                self.stores.finish_all()
            if meta.store_event >= 0:
                # The metadata does not say whose store it is; the scheduler side's map does.
                owners = self.manager._store_event_to_reqs.get(meta.store_event, ())
                self.stores.issue(meta.store_event, owners)
                if meta.need_flush:
                    self.stores.finish_all()
        due = self.stores.take_due()
        self.stores.step += 1
        if not due and not finished:
            return None
        worker_meta = (
            SimpleCPUOffloadWorkerMetadata(completed_store_events=dict.fromkeys(due, 1))
            if due
            else None
        )
        return KVConnectorOutput(
            finished_recving=set(finished), kv_connector_worker_meta=worker_meta
        )

    def busy(self) -> bool:
        """Store events not reported yet."""
        return self.stores.pending()

    def hold_stores(self, delay: int | None) -> None:
        """Holds the store reports (None), or releases them ``delay`` steps from now."""
        if delay is None:
            self.stores.held = True
        else:
            self.stores.release(delay)


@dataclass(frozen=True)
class SimpleCPUOffload:
    """``SimpleCPUOffloadConnector``, eager (or ``lazy_offload``)."""

    name: str = "simple_cpu_offload"

    def transfer_config(self, case: CaseFile) -> dict[str, Any]:
        """Both roles; a fixed CPU tier."""
        extra: dict[str, Any] = {"cpu_bytes_to_use": CPU_BYTES, "num_cpu_blocks": CPU_BLOCKS}
        if case.connector_options.lazy_offload is not None:
            extra["lazy_offload"] = case.connector_options.lazy_offload
        return {
            "kv_connector": "SimpleCPUOffloadConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": extra,
        }

    def unsupported(self, case: CaseFile) -> str | None:
        """Off without prefix caching; no full-attention group; no failure path; a store in
        flight pins its GPU copy."""
        if any(g.kind == "mamba" and g.mamba_mode == "none" for g in case.groups):
            return (
                "SimpleCPUOffloadConnector turns itself off without prefix caching (Mamba "
                "'none'): it would never load"
            )
        if case.engine.enable_prefix_caching is False:
            return "SimpleCPUOffloadConnector turns itself off without prefix caching"
        if not any(g.kind in FULL_ATTENTION_KINDS for g in case.groups):
            return (
                "SimpleCPUOffloadConnector matches prefixes on a full-attention group: its "
                "scheduler side asserts the layout has one (this one has none)"
            )
        if any(r.stored is not None and r.stored.in_flight for r in case.requests):
            return (
                "SimpleCPUOffloadConnector references the GPU blocks of a store in flight, so "
                "their GPU copy stays cached: a prefix stored in flight is a local hit, no load"
            )
        return tier_unsupported(
            case, "SimpleCPUOffloadConnector", "its worker reports no failed transfer"
        )

    def tensor_block_bytes(self) -> int:
        """It sizes its CPU tier from the GPU tensors: a metadata-only one's bytes a block."""
        return TENSOR_BLOCK_BYTES

    def attach(self, connector: Any, scheduler: Any, case: CaseFile) -> ConnectorSide:
        """The simulated worker of this scheduler's connector."""
        return SimpleCPUSide(case, connector, scheduler)
