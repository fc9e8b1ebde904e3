"""``MooncakeStoreConnector``: its scheduler side is vLLM's; the store and worker rank 0
are the harness's. The scheduler asks rank 0 for a request's hit over ZMQ; here the same
question is answered in process, as ``MooncakeStoreWorker.lookup`` answers it: vLLM's own
``MooncakeStoreCoordinator.find_longest_cache_hit`` over the keys the store holds (a hit
covering the whole request is looked up again one token short). The store holds each
request's ``stored`` tokens in every prefix-cacheable group (a shared store another
instance filled). Save jobs pin their GPU blocks until the worker reports them in
``MooncakeStoreWorkerMetadata.completed_saves``; a failed load is reported per request
with several groups, by block otherwise, as its worker does.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store.coordinator import (
    ExternalCachedBlockPool,
    MooncakeStoreCoordinator,
)
from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store.data import (
    MooncakeLookupResult,
    MooncakeStoreWorkerMetadata,
    chunk_hashes_for_block_size,
)
from vllm.v1.outputs import KVConnectorOutput

from matrix.adapters.connectors.base import (
    ConnectorSide,
    StoreReports,
    bind_counted_pool,
    store_delays,
)
from matrix.adapters.connectors.tier import TierSide
from matrix.case.format import CaseFile


def store_coordinator(scheduler: Any, kv_cache_config: Any) -> Any:
    """The coordinator worker rank 0 builds for the store's lookups."""
    config = scheduler.vllm_config
    block_size, hash_block_size = scheduler.block_size, scheduler.hash_block_size
    build = getattr(MooncakeStoreCoordinator, "from_kv_cache_config", None)
    if build is not None:
        return build(kv_cache_config, config, block_size, hash_block_size)
    groups = [g for g in kv_cache_config.kv_cache_groups if g.kv_cache_spec.prefix_cacheable]
    speculative = config.speculative_config
    options: dict[str, Any] = {
        "use_eagle": speculative is not None and speculative.use_eagle(),
        "retention_interval": kv_cache_config.prefix_cache_retention_interval,
    }
    accepted = inspect.signature(MooncakeStoreCoordinator).parameters
    options = {key: value for key, value in options.items() if key in accepted}
    return MooncakeStoreCoordinator(groups, block_size, hash_block_size, **options)


class StoreLookup:
    """``LookupKeyClient`` answered in process (rank 0's answer over the store's keys)."""

    def __init__(self, coordinator: Any) -> None:
        self.coordinator = coordinator
        self.exists: set[tuple[int, bytes]] = set()

    def put(self, block_hashes: list[Any], tokens: int) -> None:
        """The store gets every group's keys for the prompt's first ``tokens`` tokens."""
        for index, group in enumerate(self.coordinator.kv_cache_groups):
            spec = group.kv_cache_spec
            # One key per block of the group: the block's last hash, as the worker keys it.
            hashes = chunk_hashes_for_block_size(
                block_hashes, self.coordinator.hash_block_size, spec.block_size
            )
            for chunk in list(hashes)[: tokens // spec.block_size]:
                self.exists.add((index, bytes(chunk)))

    def lookup(
        self, req_id: str, num_tokens: int, block_hashes: list[Any], non_block: bool = False
    ) -> MooncakeLookupResult:
        """The longest prefix every group can reuse, short of the request's last token."""
        coordinator = self.coordinator
        pool = ExternalCachedBlockPool(coordinator.hash_block_size, self.exists)
        length = coordinator.align_lookup_length(num_tokens)
        if not block_hashes or length <= 0:
            return MooncakeLookupResult(0)
        _, hit = coordinator.find_longest_cache_hit(block_hashes, length, pool)
        if hit >= num_tokens:
            usable = coordinator.align_lookup_length(num_tokens - 1)
            if usable <= 0:
                return MooncakeLookupResult(0)
            _, hit = coordinator.find_longest_cache_hit(block_hashes, usable, pool)
        return MooncakeLookupResult(hit)

    def discard(self, req_id: str) -> None:
        """Nothing in flight to drop."""

    def reset(self) -> bool:
        """Empties the store."""
        self.exists.clear()
        return True


class MooncakeStoreSide(TierSide):
    """One scheduler's ``MooncakeStoreConnector``: the store and rank 0's worker simulated."""

    def __init__(self, case: CaseFile, connector: Any, scheduler: Any) -> None:
        super().__init__(case)
        side = connector.connector_scheduler
        real = side.client
        kv_cache_config = getattr(side, "kv_cache_config", None) or connector._kv_cache_config
        self.store = StoreLookup(store_coordinator(scheduler, kv_cache_config))
        side.client = self.store
        real.socket.close(linger=0)  # never connected: no worker rank 0 listens here
        real.ctx.term()
        self.stores = StoreReports(store_delays(case))
        self.counter = bind_counted_pool(connector, scheduler)
        self.groups = len(scheduler.kv_cache_manager.coordinator.single_type_managers)
        self.scheduler = scheduler
        # Per failing load: the blocks that arrived before it failed (not named invalid).
        self.arrived: dict[str, int] = {}

    def write_tier(self, block_hashes: list[Any], tokens: int) -> bool:
        """The shared store is written directly."""
        self.store.put(block_hashes, tokens)
        return True

    def report(self, output: Any, finished: set[str], failed: set[str]) -> KVConnectorOutput | None:
        """Finished and failed loads, and the save jobs due."""
        meta = output.kv_connector_metadata
        for request in getattr(meta, "requests", ()):
            if getattr(request, "store_job_id", None) is not None:
                self.stores.issue(request.store_job_id, (request.req_id,))
        due = self.stores.take_due()
        self.stores.step += 1
        if not due and not finished and not failed:
            return None
        invalid: set[int] = set()
        if failed and self.groups == 1:  # its worker names blocks with one group
            manager = self.scheduler.kv_cache_manager.coordinator.single_type_managers[0]
            for request_id in failed:
                blocks = manager.req_to_blocks.get(request_id, ())[
                    self.arrived.get(request_id, 0) :
                ]
                invalid |= {b.block_id for b in blocks if b.block_hash is None and not b.is_null}
        return KVConnectorOutput(
            finished_recving=finished | failed,
            failed_recving=set(failed) if self.groups > 1 else set(),
            invalid_block_ids=invalid,
            kv_connector_worker_meta=(
                MooncakeStoreWorkerMetadata(completed_saves=dict.fromkeys(due, 1)) if due else None
            ),
        )

    def busy(self) -> bool:
        """Save jobs not reported yet."""
        return self.stores.pending()

    def hold_stores(self, delay: int | None) -> None:
        """Holds the store reports (None), or releases them ``delay`` steps from now."""
        if delay is None:
            self.stores.held = True
        else:
            self.stores.release(delay)


@dataclass(frozen=True)
class MooncakeStore:
    """``MooncakeStoreConnector`` in both roles."""

    name: str = "mooncake_store"

    def transfer_config(self, case: CaseFile) -> dict[str, Any]:
        """Both roles (it saves what runs and loads what the store holds)."""
        extra: dict[str, Any] = {}
        if case.connector_options.load_async is not None:
            extra["load_async"] = case.connector_options.load_async
        settings: dict[str, Any] = {"kv_connector": "MooncakeStoreConnector", "kv_role": "kv_both"}
        if extra:
            settings["kv_connector_extra_config"] = extra
        return settings

    def unsupported(self, case: CaseFile) -> str | None:
        """It refuses Mamba ``none``; a store in flight is not yet in the store."""
        if any(g.kind == "mamba" and g.mamba_mode != "align" for g in case.groups):
            return "MooncakeStoreConnector refuses Mamba groups in a mode other than 'align'"
        if any(r.stored is not None and r.stored.in_flight for r in case.requests):
            return (
                "MooncakeStoreConnector: a key is in the store once its put completes, so a "
                "prefix stored in flight is a miss, no load"
            )
        return None

    def tensor_block_bytes(self) -> int:
        """0: its scheduler side reads no tensors."""
        return 0

    def attach(self, connector: Any, scheduler: Any, case: CaseFile) -> ConnectorSide:
        """The simulated store and worker of this scheduler's connector."""
        return MooncakeStoreSide(case, connector, scheduler)
