"""The surface list's entries the adapters' requirements are made of (``requirements.required``):
what every release's adapter needs (``SHARED``), and the differences between releases. Pure
data."""

from __future__ import annotations

from matrix.adapters.protocol import LOADING
from matrix.adapters.surface.use import Use

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
