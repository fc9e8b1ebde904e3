"""What the connector families (``adapters/connectors/``) drive of vLLM's connectors' scheduler
sides, an entry per use. Pure data."""

from __future__ import annotations

from matrix.adapters.surface.use import Use

CONNECTORS = "vllm.distributed.kv_transfer.kv_connector"
MOONCAKE_STORE = f"{CONNECTORS}.v1.mooncake.store"

CONNECTOR_USES = (
    Use(
        "vllm.v1.outputs:KVConnectorOutput",
        "connectors: a tier's jobs reported",
        parameters=("kv_connector_worker_meta",),
    ),
    Use(
        f"{CONNECTORS}.factory:KVConnectorFactory.create_connector",
        "construction: a connector's scheduler side",
        parameters=("config", "role", "kv_cache_config"),
    ),
    Use(f"{CONNECTORS}.v1.base:KVConnectorRole", "construction", attributes=("SCHEDULER",)),
    Use(
        f"{CONNECTORS}.v1.base:KVConnectorBase_V1",
        "connectors: what a tier would load, the pool a connector counts pins in",
        methods=("get_num_new_matched_tokens", "bind_gpu_block_pool"),
        attributes=("_kv_cache_config",),
    ),
    Use(
        f"{CONNECTORS}.v1.nixl:NixlConnectorScheduler",
        "connectors/prefill: whether NIXL transfers per KV cache group (True when absent)",
        attributes=("_is_hma_required",),
    ),
    Use(
        f"{CONNECTORS}.v1.moriio.moriio_connector:MoRIIOConnectorScheduler",
        "connectors/prefill: MoRIIO's notify, answered in process",
        methods=("send_notify_block",),
    ),
    Use(
        f"{CONNECTORS}.v1.multi_connector:MultiConnector",
        "connectors/multi",
        attributes=("_connectors",),
    ),
    Use(
        f"{CONNECTORS}.v1.multi_connector:MultiKVConnectorWorkerMetadata",
        "connectors/multi",
        parameters=("metadata",),
    ),
    Use(
        f"{CONNECTORS}.v1.offloading.common:OffloadingWorkerMetadata",
        "connectors/offloading: a job done",
        parameters=("completed_jobs",),
    ),
    Use(f"{CONNECTORS}.v1.offloading.common:OffloadingConnectorMetadata", "connectors/offloading"),
    Use(
        f"{CONNECTORS}.v1.simple_cpu_offload_connector:SimpleCPUOffloadConnector",
        "connectors/simple_cpu: its manager",
        attributes=("scheduler_manager",),
    ),
    Use(
        "vllm.v1.simple_kv_offload.metadata:SimpleCPUOffloadWorkerMetadata",
        "connectors/simple_cpu",
        parameters=("completed_store_events",),
    ),
    Use("vllm.v1.simple_kv_offload.metadata:SimpleCPUOffloadMetadata", "connectors/simple_cpu"),
    Use(
        f"{MOONCAKE_STORE}.connector:MooncakeStoreConnector",
        "connectors/mooncake_store",
        attributes=("connector_scheduler",),
    ),
    Use(
        f"{MOONCAKE_STORE}.scheduler:MooncakeStoreScheduler",
        "connectors/mooncake_store: its store client replaced",
        attributes=("client",),
    ),
    Use(
        f"{MOONCAKE_STORE}.coordinator:MooncakeStoreCoordinator",
        "connectors/mooncake_store: the store's lookup",
        methods=("align_lookup_length", "find_longest_cache_hit"),
        attributes=("kv_cache_groups", "hash_block_size"),
    ),
    Use(
        f"{MOONCAKE_STORE}.coordinator:ExternalCachedBlockPool",
        "connectors/mooncake_store",
        parameters=("hash_block_size", "exists"),
    ),
    Use(f"{MOONCAKE_STORE}.data:MooncakeLookupResult", "connectors/mooncake_store"),
    Use(
        f"{MOONCAKE_STORE}.data:MooncakeStoreWorkerMetadata",
        "connectors/mooncake_store",
        parameters=("completed_saves",),
    ),
    Use(
        f"{MOONCAKE_STORE}.data:chunk_hashes_for_block_size",
        "connectors/mooncake_store: a group's keys",
        parameters=("block_hashes", "hash_block_size", "block_size"),
    ),
)
