"""Every vLLM surface the adapters drive, listed once: each class or function by its import
path, and what of it they use (the parameters they pass, the methods they call or replace, the
attributes they read). Pure data: no vLLM here.

The adapters' requirements are made from these entries (``requirements.required``); the probe
(``surface_probe``, run in a release's env) records each target's actual shape, and
``surface_changes`` says, a line each, what differs between two releases' records
(``python -m matrix releases --probe``, docs/releases.md). A target is ``module:qualname``
(``vllm.v1.outputs:ModelRunnerOutput``, ``...:KVCacheCoordinator.get_num_blocks_to_allocate``);
other tools read :data:`SURFACE` or :func:`targets` as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from matrix.adapters.protocol import LOADING, PREEMPTED, RUNNING


@dataclass(frozen=True)
class Use:
    """What the adapters rely on of one class or function of vLLM's."""

    target: str  # "module:qualname"
    why: str
    # Named parameters passed (for a class: its constructor's).
    parameters: tuple[str, ...] = ()
    # Methods called or replaced on the instance: callable on the class.
    methods: tuple[str, ...] = ()
    # Instance attributes ``__init__`` sets (``self.name = ...``), no method of that name.
    assigned: tuple[str, ...] = ()
    # Read, of any kind: a field, a property, a class attribute, an enum member.
    attributes: tuple[str, ...] = ()
    # Relied on to be absent: no parameter, class attribute or assignment of that name.
    without: tuple[str, ...] = ()

    @property
    def module(self) -> str:
        """The module the target is imported from."""
        return self.target.partition(":")[0]

    @property
    def qualname(self) -> str:
        """The target's name in its module (``Class`` or ``Class.method``)."""
        return self.target.partition(":")[2]

    def names(self) -> tuple[str, ...]:
        """Every member or parameter name this use states something about."""
        return (*self.parameters, *self.methods, *self.assigned, *self.attributes, *self.without)

    def describe(self) -> str:
        """In words, as a refusal names it: ``Scheduler(hash_block_size) (why)``."""
        parts = [f"{self.qualname}({', '.join(self.parameters)})"] if self.parameters else []
        parts += [f"{self.qualname}.{name}()" for name in self.methods]
        parts += [f"{self.qualname}.{name} (set by __init__)" for name in self.assigned]
        parts += [f"{self.qualname}.{name}" for name in self.attributes]
        stated = ", ".join(parts) or self.qualname
        if self.without:
            stated += f" without {', '.join(self.without)}"
        return f"{stated} ({self.why})"


SCHEDULER = "vllm.v1.core.sched.scheduler:Scheduler"
COORDINATOR_COUNT = (
    "vllm.v1.core.kv_cache_coordinator:KVCacheCoordinator.get_num_blocks_to_allocate"
)
MANAGER_COUNT = (
    "vllm.v1.core.single_type_kv_cache_manager:SingleTypeKVCacheManager.get_num_blocks_to_allocate"
)
RUNNER_OUTPUT = "vllm.v1.outputs:ModelRunnerOutput"
SPEC_STEP = "_spec_decode_step_blocks"  # the stock margin's name: absent, a method, an attribute

# What every release's adapter requires (``requirements.SHARED_REQUIREMENTS``).
RESERVATION = Use(
    SCHEDULER,
    "the async-load reservation variants replace",
    methods=("_inflight_prefill_reserved_blocks",),
)
INFLIGHT_PREFILLS = Use(SCHEDULER, "the in-flight async loads", assigned=("_inflight_prefills",))
SCHEDULER_HASH_BLOCK = Use(
    SCHEDULER, "built as EngineCore builds it", parameters=("hash_block_size",)
)
INFLIGHT_COUNT = Use(
    COORDINATOR_COUNT,
    "an in-flight load's remaining blocks",
    parameters=(
        *("request_id", "num_tokens", "new_computed_blocks", "num_encoder_tokens"),
        *("total_computed_tokens", "num_local_computed_tokens", "num_tokens_main_model"),
        "apply_admission_cap",
    ),
)
ADMISSION_COUNT = Use(
    MANAGER_COUNT,
    "an admitting request's own need, group by group: adapters/admission.py",
    parameters=(
        *("request_id", "num_tokens", "new_computed_blocks", "total_computed_tokens"),
        *("num_local_computed_tokens", "num_tokens_main_model", "apply_admission_cap"),
    ),
)
ALLOCATE_SLOTS = Use(
    "vllm.v1.core.kv_cache_manager:KVCacheManager.allocate_slots",
    "where a per-admission margin is added; see Handle.install_reservation",
    parameters=("reserved_blocks", "delay_cache_blocks"),
)
CONNECTOR_OUTPUT = Use(
    "vllm.v1.outputs:KVConnectorOutput",
    "how a load reports completion or failure",
    parameters=("finished_recving", "failed_recving", "invalid_block_ids"),
)
DEFERRED_FREES = Use(
    SCHEDULER, "blocks whose return to the pool waits for a step", assigned=("deferred_frees",)
)
FINISH_REQUESTS = Use(
    f"{SCHEDULER}.finish_requests",
    "how the engine aborts",
    parameters=("request_ids", "finished_status"),
)
REQUEST = Use(
    "vllm.v1.request:Request",
    "a request as EngineCore makes it",
    parameters=("prompt_token_ids", "sampling_params", "block_hasher"),
)
MAMBA_CACHE_MODE = Use(
    "vllm.config:CacheConfig", "Mamba groups' mode", attributes=("mamba_cache_mode",)
)
LOADING_STATUS = Use(
    "vllm.v1.request:RequestStatus",
    "a request whose KV is loading",
    attributes=(LOADING,),
)
DRAFTS = Use(SCHEDULER, "the drafts a step proposes", methods=("update_draft_token_ids",))
SHARED = (
    RESERVATION,
    INFLIGHT_PREFILLS,
    SCHEDULER_HASH_BLOCK,
    INFLIGHT_COUNT,
    ADMISSION_COUNT,
    ALLOCATE_SLOTS,
    CONNECTOR_OUTPUT,
    DEFERRED_FREES,
    FINISH_REQUESTS,
    REQUEST,
    MAMBA_CACHE_MODE,
    LOADING_STATUS,
    DRAFTS,
)

# What some releases' adapters require: the differences between them.
INDEXED_RUNNER_OUTPUT = Use(
    RUNNER_OUTPUT,
    "the runner's output, indexed by the runner: 0.30-0.33",
    parameters=("req_ids", "req_id_to_index", "sampled_token_ids", "kv_connector_output"),
)
RUNNER_OUTPUT_034 = Use(
    RUNNER_OUTPUT,
    "0.34's, the scheduler indexing req_ids itself",
    parameters=("req_ids", "sampled_token_ids", "kv_connector_output"),
    without=("req_id_to_index",),
)
NO_SPEC_MARGIN = Use(
    SCHEDULER,
    "0.30's admission, with no speculative-decode margin; with one a later adapter applies",
    without=(SPEC_STEP,),
)
SPEC_MARGIN_METHOD = Use(SCHEDULER, "0.31's margin", methods=(SPEC_STEP,))
SPEC_MARGIN_ATTRIBUTE = Use(SCHEDULER, "0.32's margin, an int", assigned=(SPEC_STEP,))
PREFILL_END = Use(COORDINATOR_COUNT, "0.31's coordinator option", parameters=("prefill_end",))
PARKED_RESERVATIONS = Use(
    SCHEDULER,
    "0.34's parked async loads, their reservations cached",
    assigned=("_parked_reservations",),
)

# The rest of what the harness drives, a line per module that drives it; no requirement
# checks these (a release without one fails where it is used, or a case is unsupported).
DRIVEN = (
    Use(
        SCHEDULER,
        "handle, engine_loop: built, stepped, read",
        parameters=(
            *("vllm_config", "kv_cache_config", "structured_output_manager", "block_size"),
            "log_stats",
        ),
        methods=("schedule", "update_from_output", "add_request", "has_requests"),
        assigned=(
            *("requests", "running", "kv_cache_manager", "connector", "block_size"),
            *("max_model_len", "num_spec_tokens", "num_lookahead_tokens", "hash_block_size"),
            "vllm_config",
        ),
    ),
    Use(SCHEDULER, "connectors/warm: a tier warmed", methods=("reset_prefix_cache",)),
    Use("vllm.v1.core.sched.async_scheduler:AsyncScheduler", "engine.async_scheduling"),
    Use(
        "vllm.v1.core.sched.output:SchedulerOutput",
        "engine_loop: what a step scheduled",
        attributes=(
            *("num_scheduled_tokens", "total_num_scheduled_tokens"),
            *("scheduled_spec_decode_tokens", "preempted_req_ids"),
        ),
    ),
    Use(
        "vllm.v1.outputs:DraftTokenIds",
        "engine_loop: the drafter's proposals",
        parameters=("req_ids", "draft_token_ids"),
    ),
    Use(
        "vllm.v1.structured_output:StructuredOutputManager",
        "handle: the scheduler's",
        parameters=("vllm_config",),
    ),
    Use(
        "vllm.v1.request:Request",
        "handle, snapshots, admission: a request built and read",
        parameters=("request_id", "pooling_params"),
        attributes=(
            *("request_id", "status", "num_tokens", "num_computed_tokens", "num_prompt_tokens"),
            *("num_preemptions", "is_prefill_chunk"),
        ),
    ),
    Use(
        "vllm.v1.request:RequestStatus",
        "requests: statuses in the verdict's words",
        attributes=(RUNNING, PREEMPTED, "FINISHED_ABORTED", "is_finished"),
    ),
    Use(
        "vllm.sampling_params:SamplingParams",
        "handle: a request's sampling",
        parameters=("max_tokens", "ignore_eos"),
        attributes=("extra_args",),
    ),
    Use(
        "vllm.v1.core.kv_cache_manager:KVCacheManager",
        "reservation, accounting",
        methods=("get_computed_blocks",),
        assigned=("coordinator", "block_pool", "empty_kv_cache_blocks"),
    ),
    Use("vllm.v1.core.kv_cache_manager:KVCacheBlocks", "reservation", attributes=("blocks",)),
    Use(
        "vllm.v1.core.kv_cache_coordinator:KVCacheCoordinator",
        "reservation, accounting",
        assigned=("single_type_managers",),
    ),
    Use(
        "vllm.v1.core.single_type_kv_cache_manager:SingleTypeKVCacheManager",
        "admission, accounting",
        assigned=("block_size", "kv_cache_spec", "req_to_blocks"),
    ),
    Use("vllm.v1.core.single_type_kv_cache_manager:CrossAttentionManager", "admission"),
    Use(
        "vllm.v1.core.block_pool:BlockPool",
        "accounting: the pool",
        methods=("get_num_free_blocks",),
        assigned=("null_block", "num_gpu_blocks"),
    ),
    Use(
        "vllm.v1.core.kv_cache_utils:KVCacheBlock",
        "accounting: a block",
        attributes=("block_id", "is_null"),
    ),
    Use(
        "vllm.v1.core.kv_cache_utils:get_request_block_hasher",
        "blueprint: requests' block hashes",
        parameters=("hash_block_size", "caching_hash_fn"),
    ),
    Use(
        "vllm.v1.core.kv_cache_utils:resolve_kv_cache_block_sizes",
        "blueprint: the scheduler's block sizes",
        parameters=("kv_cache_config", "vllm_config"),
    ),
    Use("vllm.v1.core.kv_cache_utils:init_none_hash", "runtime", parameters=("hash_fn",)),
    Use("vllm.utils.hashing:sha256", "blueprint, runtime"),
    Use("vllm.utils.math_utils:cdiv", "admission"),
    Use(
        "vllm.v1.core.kv_cache_planning:get_global_kv_cache_groups",
        "layout, startup: the engine's grouping (0.33 on)",
        parameters=("vllm_config", "kv_cache_specs"),
    ),
    Use(
        "vllm.v1.core.kv_cache_planning:get_kv_cache_configs",
        "startup: the engine's start-up sizing",
        parameters=("vllm_config", "kv_cache_specs", "available_memory"),
    ),
    Use(
        "vllm.v1.kv_cache_interface:KVCacheConfig",
        "kv_cache, handle: the layout",
        parameters=("num_blocks", "kv_cache_tensors", "kv_cache_groups"),
    ),
    Use(
        "vllm.v1.kv_cache_interface:KVCacheGroupSpec",
        "kv_cache",
        parameters=("layer_names", "kv_cache_spec"),
    ),
    Use(
        "vllm.v1.kv_cache_interface:FullAttentionSpec",
        "kv_cache: a group's spec",
        parameters=("block_size", "num_kv_heads", "head_size", "dtype"),
    ),
    Use(
        "vllm.v1.kv_cache_interface:SlidingWindowSpec",
        "kv_cache",
        parameters=("block_size", "sliding_window"),
    ),
    Use(
        "vllm.v1.kv_cache_interface:ChunkedLocalAttentionSpec",
        "kv_cache",
        parameters=("block_size", "attention_chunk_size"),
    ),
    Use("vllm.v1.kv_cache_interface:MLAAttentionSpec", "kv_cache", parameters=("block_size",)),
    Use(
        "vllm.v1.kv_cache_interface:MambaSpec",
        "kv_cache: a Mamba group's spec",
        parameters=("block_size", "shapes", "dtypes", "mamba_cache_mode", "num_speculative_blocks"),
    ),
    Use(
        "vllm.config:VllmConfig",
        "config: the engine's configuration",
        parameters=(
            *("model_config", "scheduler_config", "cache_config", "kv_transfer_config"),
            *("device_config", "speculative_config"),
        ),
    ),
    Use(
        "vllm.config:ModelConfig",
        "config, config_json: the model's",
        parameters=("model", "skip_tokenizer_init", "max_model_len", "dtype", "hf_overrides"),
    ),
    Use(
        "vllm.config:SchedulerConfig",
        "config: the case's engine settings",
        parameters=(
            *("max_model_len", "is_encoder_decoder", "max_num_seqs", "max_num_batched_tokens"),
            "async_scheduling",
        ),
        attributes=("disable_hybrid_kv_cache_manager",),
    ),
    Use(
        "vllm.config:CacheConfig",
        "config",
        parameters=("block_size", "enable_prefix_caching"),
    ),
    Use(
        "vllm.config:SpeculativeConfig",
        "config: speculative decoding",
        parameters=(
            *("method", "num_speculative_tokens", "target_model_config"),
            "target_parallel_config",
        ),
    ),
    Use("vllm.config:ParallelConfig", "config, layer_specs", parameters=("tensor_parallel_size",)),
    Use("vllm.config:DeviceConfig", "config: the CPU", parameters=("device",)),
    Use(
        "vllm.config:KVTransferConfig",
        "config, requirements: the connector and the load failure policy",
        parameters=("kv_connector", "kv_role"),
        attributes=("kv_load_failure_policy",),
    ),
    Use(
        "vllm.distributed.kv_transfer.kv_connector.factory:KVConnectorFactory.create_connector",
        "construction: a connector's scheduler side",
        parameters=("config", "role", "kv_cache_config"),
    ),
    Use(
        "vllm.distributed.kv_transfer.kv_connector.v1.base:KVConnectorRole",
        "construction",
        attributes=("SCHEDULER",),
    ),
    Use(
        "vllm.distributed.kv_transfer.kv_connector.v1.base:KVConnectorBase_V1",
        "connectors/tier: what a tier would load",
        methods=("get_num_new_matched_tokens",),
    ),
    Use(
        "vllm.distributed.kv_transfer.kv_connector.v1.multi_connector:MultiKVConnectorWorkerMetadata",
        "connectors/multi",
        parameters=("metadata",),
    ),
    Use(
        "vllm.distributed.kv_transfer.kv_connector.v1.offloading.common:OffloadingWorkerMetadata",
        "connectors/offloading",
    ),
    Use(
        "vllm.distributed.kv_transfer.kv_connector.v1.offloading.common:OffloadingConnectorMetadata",
        "connectors/offloading",
    ),
    Use(
        "vllm.v1.simple_kv_offload.metadata:SimpleCPUOffloadWorkerMetadata",
        "connectors/simple_cpu",
        parameters=("completed_store_events",),
    ),
    Use("vllm.v1.simple_kv_offload.metadata:SimpleCPUOffloadMetadata", "connectors/simple_cpu"),
    Use(
        "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store.data:MooncakeStoreWorkerMetadata",
        "connectors/mooncake_store",
        parameters=("completed_saves",),
    ),
    Use(
        "vllm.model_executor.models:ModelRegistry",
        "registry: the architectures a release has",
        methods=("get_supported_archs",),
    ),
)

SURFACE: tuple[Use, ...] = (
    *SHARED,
    INDEXED_RUNNER_OUTPUT,
    RUNNER_OUTPUT_034,
    NO_SPEC_MARGIN,
    SPEC_MARGIN_METHOD,
    SPEC_MARGIN_ATTRIBUTE,
    PREFILL_END,
    PARKED_RESERVATIONS,
    *DRIVEN,
)


def targets() -> dict[str, tuple[Use, ...]]:
    """Each target, in the list's order, with every use of it."""
    found: dict[str, list[Use]] = {}
    for use in SURFACE:
        found.setdefault(use.target, []).append(use)
    return {target: tuple(uses) for target, uses in found.items()}
