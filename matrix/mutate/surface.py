"""The reservation surface: the vLLM functions whose mutants measure a suite, per release.
Pure data: no vLLM here.

A target is ``module:qualname`` (the format of ``matrix/adapters/surface.py``'s uses). Where a
function is mostly about something else (``Scheduler.schedule``: 1,100 lines, of which the
waiting requests' admission is one block), a :class:`Region` names the part mutated by
landmarks in its code, never by line numbers (``regions``).
"""

from __future__ import annotations

from dataclasses import dataclass

from matrix.adapters.surface.use import target_parts
from matrix.releases import nearest_release, release_key

SCHEDULER = "vllm.v1.core.sched.scheduler:Scheduler"
MANAGERS = "vllm.v1.core.single_type_kv_cache_manager"

# Statements about other features than the reservation, inside the admission block: a
# statement whose own code (not its nested blocks) names one is left out with its blocks.
OTHER_FEATURES = (
    *("lora_config", "lora_request", "scheduled_loras", "has_encoder_inputs"),
    *("encoder_inputs_to_schedule", "external_load_encoder_input", "duplicate_encoder_inputs"),
    *("new_encoder_compute_budget", "encoder_compute_budget", "_ec_transfer_pending"),
    *("prefill_stats", "log_stats", "record_event", "connector_prefix_cache_stats"),
    *("record_prefix_cache_stats", "pad_spec_decode", "scheduled_spec_decode_tokens"),
    *("num_stale_output_tokens", "drafts_needed", "prefill_admitted", "resumable"),
    *("cache_aware_window", "prefill_capacity_bound", "logger"),
    *("connector_prefix_cache_queries", "connector_prefix_cache_hits", "ec_computed_tokens"),
)
# A block that assigns one of these is the local prefill's chunking, not an admission: the
# whole block is left out.
OTHER_BLOCKS = ("request_token_budget",)


@dataclass(frozen=True)
class Region:
    """The part of a function mutated: the innermost ``enclosing`` statement (``If`` or
    ``While``) around the first use of ``anchor`` (a name or attribute), its ``body`` alone or
    its ``branch`` (test and body, not its ``else``), less other features' statements; with no
    ``anchor``, the whole function less those."""

    anchor: str
    enclosing: str = "If"
    take: str = "body"  # "body" or "branch"
    other_features: tuple[str, ...] = OTHER_FEATURES
    other_blocks: tuple[str, ...] = OTHER_BLOCKS

    def describe(self) -> str:
        """In words, for the report."""
        if not self.anchor:
            return "the whole function, less other features"
        part = "body" if self.take == "body" else "test and body"
        return f"the {part} of the {self.enclosing} around `{self.anchor}`"


@dataclass(frozen=True)
class Target:
    """One function mutated: ``module:qualname``, and the part of it (None: all of it)."""

    target: str
    region: Region | None = None

    @property
    def module(self) -> str:
        """The module the function is defined in."""
        return target_parts(self.target)[0]

    @property
    def qualname(self) -> str:
        """``Class.method``."""
        return target_parts(self.target)[1]


# The waiting requests' admission: the block that takes requests from the waiting queues
# (the loop calling _handle_blocked_waiting_request), admits async loads against the
# in-flight reservation and promotes loaded requests.
ADMISSION = Region("_handle_blocked_waiting_request")
# Only the branch that promotes a finished load; the others wait for grammars and streams.
PROMOTION = Region("WAITING_FOR_REMOTE_KVS", take="branch")

# 0.33 counts its async loads by stage for its statistics alone (SchedulerStats'
# num_kv_fetch_reqs_by_stage); 0.34 admits loads by those counts (_admits_inflight_kv_load).
STATISTICS_033 = ("_set_kv_fetch_stage",)


def _shared(statistics: tuple[str, ...]) -> tuple[Target, ...]:
    admission = Region(ADMISSION.anchor, other_features=OTHER_FEATURES + statistics)
    whole = Region("", other_features=statistics) if statistics else None
    return (
        Target(f"{SCHEDULER}.schedule", admission),
        Target(f"{SCHEDULER}._request_remaining_blocks"),
        Target(f"{SCHEDULER}._inflight_prefill_reserved_blocks"),
        Target(f"{SCHEDULER}._update_waiting_for_remote_kv"),
        Target(f"{SCHEDULER}._handle_blocked_waiting_request", PROMOTION),
        Target(f"{SCHEDULER}._update_from_kv_xfer_finished", whole),
        Target("vllm.v1.core.kv_cache_manager:KVCacheManager.allocate_slots"),
        Target("vllm.v1.core.kv_cache_coordinator:KVCacheCoordinator.get_num_blocks_to_allocate"),
        Target(f"{MANAGERS}:SingleTypeKVCacheManager.get_num_blocks_to_allocate"),
        Target(f"{MANAGERS}:MambaManager.get_num_blocks_to_allocate"),
    )


# 0.34's parked loads (their reservations cached), its in-flight load limit and its queue
# of requests that may load asynchronously.
PARKED_LOADS = (
    Target(f"{SCHEDULER}._reserve_parked"),
    Target(f"{SCHEDULER}._unreserve_parked"),
    Target(f"{SCHEDULER}._admits_inflight_kv_load"),
    Target(f"{SCHEDULER}._next_waiting_queue"),
    Target(f"{SCHEDULER}._enqueue_waiting_request"),
)

SURFACES: dict[str, tuple[Target, ...]] = {
    "0.33": _shared(STATISTICS_033),
    "0.34": (*_shared(()), *PARKED_LOADS),
}


def surface_for(version: str) -> tuple[Target, ...]:
    """The surface of the release ``version`` is driven as (the newest listed one not newer
    than it); empty for a release older than every listed one."""
    release = nearest_release(version)
    listed = sorted(
        (r for r in SURFACES if release_key(r) <= release_key(release)), key=release_key
    )
    return SURFACES[listed[-1]] if listed else ()
