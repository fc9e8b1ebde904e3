"""What vLLM's model runner requires of each scheduler output, checked by the simulated
runner that receives it: the runner's side of the contract the block accounting cannot see.

- **New or cached.** A runner holds the state of the requests it was sent. A request it does
  not hold (never sent, or preempted since: its blocks were freed) must come as new
  (``NewRequestData``), or, where the release re-sends a preempted request as cached
  (0.30-0.33 with the V1 runner), as cached and marked resumed; a request it holds comes as
  cached, not resumed. A load promoted to ``PREEMPTED`` that never ran, or to ``WAITING``
  after a preemption, breaks this on the releases that tell the two apart.
- **Slots.** Every scheduled token has a slot, and so have the drafter's lookahead tokens:
  in every attention group the request's blocks cover ``min(computed + scheduled +
  lookahead, max_model_len)`` tokens (what ``allocate_slots`` promises; a Mamba group keeps
  state blocks, not slots per token, and is not counted).
- **A load is its tokens.** An async load's admission holds, in each full-attention group,
  exactly the blocks of the tokens it computes (its local hit and the load): the remote side
  sends that many, and the runner writes the load into them. The connector is told it at
  admission (``update_state_after_alloc``), so the check runs once per admission.
- **Loaded before it runs.** A request admitted as an async load is not scheduled before the
  worker reported its load finished or failed.
- **Synchronous loads before the forward.** The output's ``has_sync_kv_loads`` says whether a
  request it schedules consumes KV the connector loads within the step (``load_async``
  false): the worker starts the step's loads before the forward only then, and after it
  otherwise, off the critical path (``pre_forward`` in vLLM's ``v1/worker/gpu/kv_connector.py``).
  Unset, the forward reads KV not yet loaded; set without one, every async load's
  submission waits on the forward's launch.
- **Computed tokens have KV.** A request the runner takes anew (new, or resumed) with tokens
  already computed holds, in every full-attention group, blocks whose KV exists for them:
  blocks from the prefix cache (cached before this step, by any request), the blocks its own
  load filled (a failed load's up to its first invalid block; a synchronous load's this
  step), or a copy made this step. A block allocated under computed tokens, and cached by the
  request itself as it was allocated, holds no KV: the runner would read garbage.

The first violation of a step is returned in words; the harness records it (``protocol``).
"""

from __future__ import annotations

import weakref
from typing import Any

from vllm.v1.kv_cache_interface import AttentionSpec, FullAttentionSpec, MLAAttentionSpec
from vllm.v1.request import RequestStatus

# Attention groups whose blocks are not one slot per token of the request's sequence.
NOT_SLOTS = frozenset({"CrossAttentionSpec", "EncoderOnlyAttentionSpec"})
# The groups a load fills block for block (a sliding window or a chunk drops blocks).
WHOLE_SEQUENCE = (FullAttentionSpec, MLAAttentionSpec)
# Per group: its index, the blocks it holds per request, its block size.
Blocks = tuple[int, dict[str, Any], int]


def cdiv(tokens: int, block_size: int) -> int:
    """The blocks ``tokens`` tokens fill."""
    return -(-tokens // block_size)


class RunnerProtocol:
    """The runner's view of one scheduler: the requests it holds, the loads it awaits."""

    def __init__(self, scheduler: Any, resumed_as_new: bool) -> None:
        self.scheduler = scheduler
        # Where a preempted request comes back as a new one (its worker state was dropped).
        self.resumed_as_new = resumed_as_new
        managers = scheduler.kv_cache_manager.coordinator.single_type_managers
        # (blocks per request, block size) of every group whose blocks are slots per token,
        # and of those, the full-attention ones (a load's blocks are exactly its tokens').
        self.slot_groups: list[Blocks] = [
            (index, m.req_to_blocks, m.block_size)
            for index, m in enumerate(managers)
            if isinstance(m.kv_cache_spec, AttentionSpec)
            and type(m.kv_cache_spec).__name__ not in NOT_SLOTS
        ]
        self.full_groups: list[Blocks] = [
            (index, blocks, size)
            for index, blocks, size in self.slot_groups
            if type(managers[index].kv_cache_spec) in WHOLE_SEQUENCE
        ]
        self.max_model_len = scheduler.max_model_len
        self.lookahead = scheduler.num_lookahead_tokens
        # Request id -> its preemptions when last sent: the requests the runner holds.
        self.held: dict[str, int] = {}
        # Told to the connector at admission, checked at the next batch: (request, tokens).
        self.told: list[tuple[Any, int]] = []
        self.awaited: set[str] = set()  # admitted as async loads, their load not reported
        # Per request: the ids of the blocks its reported load filled, per full group.
        self.filled: dict[str, list[set[int]]] = {}
        # Since the last batch: the ids of the blocks each request cached itself.
        self.cached_now: dict[str, set[int]] = {}
        self._watch_caching(scheduler.kv_cache_manager.block_pool)
        connector = getattr(scheduler, "connector", None)
        if connector is not None:
            self._watch(connector)

    def _watch(self, connector: Any) -> None:
        """Hears what the connector is told at each admission (its instance, not its class)."""
        # The class's function and a weak reference: a bound method kept on its own instance
        # would make a cycle, leaving every run's scheduler to the cyclic collector.
        tell = type(connector).update_state_after_alloc
        instance = weakref.ref(connector)
        told = self.told

        def update_state_after_alloc(request: Any, blocks: Any, num_external_tokens: int) -> Any:
            if num_external_tokens:
                told.append((request, num_external_tokens))
            return tell(instance(), request, blocks, num_external_tokens)

        connector.update_state_after_alloc = update_state_after_alloc

    def _watch_caching(self, pool: Any) -> None:
        """Hears which blocks each request caches (on the pool instance, not its class)."""
        cache = type(pool).cache_full_blocks  # as above: no cycle through the instance
        instance = weakref.ref(pool)
        cached_now = self.cached_now

        def cache_full_blocks(
            request: Any,
            blocks: Any,
            num_cached_blocks: int,
            num_full_blocks: int,
            *args: Any,
            **kwargs: Any,
        ) -> Any:
            new = blocks[num_cached_blocks:num_full_blocks]
            cached_now.setdefault(request.request_id, set()).update(b.block_id for b in new)
            return cache(
                instance(), request, blocks, num_cached_blocks, num_full_blocks, *args, **kwargs
            )

        pool.cache_full_blocks = cache_full_blocks

    def reported(self, finished: set[str], failed: set[str], arrived: dict[str, int]) -> None:
        """The worker reported these loads finished or failed (a failed one's first
        ``arrived`` blocks filled)."""
        for request_id in finished | failed:
            self.awaited.discard(request_id)
            kept = arrived.get(request_id, 0) if request_id in failed else None
            self.filled[request_id] = [
                {b.block_id for b in blocks.get(request_id, ())[:kept] if not b.is_null}
                for _, blocks, _ in self.full_groups
            ]

    def check(self, output: Any) -> str:
        """The first thing in the scheduler output ``output`` a runner would refuse, in
        words, or ``""``; then takes the batch as the runner does."""
        told = self.told
        scheduled = output.num_scheduled_tokens
        synced = {request.request_id for request, _ in told} if told else set()
        sync_loads = (
            sorted(
                request.request_id
                for request, _ in told
                if request.status != RequestStatus.WAITING_FOR_REMOTE_KVS
                and request.request_id in scheduled
            )
            if told
            else []
        )
        problem = self._admissions() if told else ""
        if not problem:
            problem = self._sync_flag(output, sync_loads)
        requests = self.scheduler.requests
        early = self.awaited.intersection(scheduled)
        if early and not problem:
            problem = f"{min(early)} scheduled before the worker reported its load"
        cached = output.scheduled_cached_reqs
        resumed = getattr(cached, "resumed_req_ids", None) or ()
        computed: dict[str, int] = {}
        copied = {c.dst_block_id for c in getattr(output, "kv_cache_block_copies", None) or ()}
        for new in output.scheduled_new_reqs:
            request_id = new.req_id
            computed[request_id] = new.num_computed_tokens
            if not problem and new.num_computed_tokens and request_id not in synced:
                problem = self._kv_exists(request_id, new.num_computed_tokens, copied)
            preemptions = requests[request_id].num_preemptions
            if not problem and request_id in self.held:
                if self.held[request_id] == preemptions:
                    problem = (
                        f"{request_id} sent as new, but the runner holds it (sent before, "
                        "not preempted since)"
                    )
                elif not self.resumed_as_new:
                    problem = (
                        f"{request_id} sent as new after a preemption, which this release "
                        "resumes as cached"
                    )
            self.held[request_id] = preemptions
        for request_id, tokens in zip(cached.req_ids, cached.num_computed_tokens, strict=True):
            computed[request_id] = tokens
            preemptions = requests[request_id].num_preemptions
            if not problem:
                problem = self._cached(request_id, preemptions, request_id in resumed)
            self.held[request_id] = preemptions
        if not problem:
            problem = self._slots(scheduled, computed)
        for request_id in output.finished_req_ids:
            self.held.pop(request_id, None)
        self.cached_now.clear()
        return problem

    @staticmethod
    def _sync_flag(output: Any, sync_loads: list[str]) -> str:
        """Whether the output's ``has_sync_kv_loads`` is true exactly when it schedules a
        request whose load the connector makes within the step."""
        flagged = getattr(output, "has_sync_kv_loads", None)
        if flagged is None or flagged == bool(sync_loads):
            return ""
        if sync_loads:
            return (
                f"{sync_loads[0]} scheduled with a synchronous KV load, but has_sync_kv_loads "
                "is false: the worker would start the load after the forward that reads it"
            )
        return (
            "has_sync_kv_loads is true, but no request scheduled loads synchronously: the "
            "worker would start the step's async loads before the forward"
        )

    def _cached(self, request_id: str, preemptions: int, resumed: bool) -> str:
        if request_id not in self.held:
            kind = "resumed" if resumed else "cached"
            return (
                f"{request_id} sent as {kind}, but the runner never held it (a first "
                "schedule is new)"
            )
        preempted = self.held[request_id] != preemptions
        if resumed and not preempted:
            return f"{request_id} sent as resumed, but it was not preempted since it last ran"
        if preempted and (self.resumed_as_new or not resumed):
            how = "new" if self.resumed_as_new else "resumed"
            return (
                f"{request_id} sent as running after a preemption: this release sends it as {how}"
            )
        return ""

    def _kv_exists(self, request_id: str, computed: int, copied: set[int]) -> str:
        """Whether every block under a request's computed tokens holds their KV."""
        filled = self.filled.get(request_id)
        own = self.cached_now.get(request_id, set())
        for index, (group, blocks, block_size) in enumerate(self.full_groups):
            held = blocks.get(request_id, ())
            for position, block in enumerate(held[: cdiv(computed, block_size)]):
                if block.is_null or block.block_id in copied:
                    continue
                if block.block_hash is not None and block.block_id not in own:
                    continue  # from the prefix cache
                if filled is not None and block.block_id in filled[index]:
                    continue
                first = position * block_size
                return (
                    f"{request_id} sent with {computed} tokens computed, but its block "
                    f"{block.block_id} in full-attention group {group} (tokens {first}-"
                    f"{first + block_size - 1}) holds no KV: not from the prefix cache, not "
                    "filled by its load"
                )
        return ""

    def _slots(self, scheduled: dict[str, int], computed: dict[str, int]) -> str:
        lookahead, longest = self.lookahead, self.max_model_len
        for request_id, tokens in scheduled.items():
            start = computed[request_id]
            needed = min(start + tokens + lookahead, longest)
            for group, blocks, block_size in self.slot_groups:
                held = len(blocks.get(request_id, ()))
                if held * block_size < needed:
                    return (
                        f"{request_id} scheduled for tokens {start}-{start + tokens - 1}"
                        f" (+{lookahead} lookahead) holds {held} blocks of {block_size} tokens"
                        f" in group {group}: {held * block_size} slots for {needed}"
                    )
        return ""

    def _admissions(self) -> str:
        """Each async load admitted since the last batch holds its tokens' blocks exactly."""
        problem = ""
        for request, tokens in self.told:
            if request.status != RequestStatus.WAITING_FOR_REMOTE_KVS:
                continue  # a synchronous load: its slots are checked when it is scheduled
            request_id = request.request_id
            self.awaited.add(request_id)
            computed = request.num_computed_tokens
            for group, blocks, block_size in self.full_groups:
                held = len(blocks.get(request_id, ()))
                if not problem and held != cdiv(computed, block_size):
                    problem = (
                        f"{request_id}'s async load of {tokens} tokens ({computed} computed)"
                        f" holds {held} blocks of {block_size} tokens in full-attention group"
                        f" {group}: the load fills {cdiv(computed, block_size)}"
                    )
        self.told.clear()
        return problem
