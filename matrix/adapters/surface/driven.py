"""The rest of what the harness drives of vLLM's scheduler, KV cache, requests and configs, an
entry per use, named by the module that drives it; no requirement checks these (a release
without one fails where it is used, or a case is unsupported). Pure data."""

from __future__ import annotations

from matrix.adapters.protocol import PREEMPTED, RUNNING
from matrix.adapters.surface.required import SCHEDULER
from matrix.adapters.surface.use import Use

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
        "vllm.model_executor.models:ModelRegistry",
        "registry: the architectures a release has",
        methods=("get_supported_archs",),
    ),
)
