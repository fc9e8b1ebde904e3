"""What the harness and the variants know of a scheduler: two small protocols and the plain
data they exchange. No vLLM here: the verdict and report work on these records alone."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from matrix.case.format import CaseFile
from matrix.case.parts import RequestSpec
from matrix.frozen import fast_init

# A request's status in vLLM's RequestStatus names, narrowed to what the verdict reasons about:
# every finished status (and a request the scheduler already dropped) is FINISHED, and every
# other waiting status is WAITING.
WAITING: Literal["WAITING"] = "WAITING"
LOADING: Literal["WAITING_FOR_REMOTE_KVS"] = "WAITING_FOR_REMOTE_KVS"
RUNNING: Literal["RUNNING"] = "RUNNING"
PREEMPTED: Literal["PREEMPTED"] = "PREEMPTED"
FINISHED: Literal["FINISHED"] = "FINISHED"
Status = Literal["WAITING", "WAITING_FOR_REMOTE_KVS", "RUNNING", "PREEMPTED", "FINISHED"]


def ample_pool(case: CaseFile) -> int:
    """A pool in which no request of ``case`` is ever refused for want of blocks."""
    sizes = [g.tokens_per_block(case.max_model_len) for g in case.groups]
    # A request never holds more than max_model_len tokens per group; the slack covers Mamba's
    # speculative state blocks (at most one per speculative token) and the null block.
    return sum(math.ceil(case.max_model_len / size) + 32 for size in sizes)


class ProtocolViolation(Exception):
    """vLLM raised in a step whose batch its model runner would already have refused: the
    violation (in words) came first, the error (this exception's cause) after it."""

    def __init__(self, violation: str) -> None:
        super().__init__(violation)
        self.violation = violation


class UnsupportedRelease(Exception):
    """The installed vLLM cannot run the matrix; the message names what is missing."""


@dataclass(frozen=True)
class GroupGeometry:
    """One KV cache group's block size, and whether it holds Mamba state."""

    block_size: int
    is_mamba: bool


@dataclass(frozen=True)
class Geometry:
    """What a reservation rule needs to know about one scheduler instance."""

    spec_step_tokens: int  # 1 + num_spec_tokens + num_lookahead_tokens, or 0 without spec decode
    scheduler_block_size: int
    groups: tuple[GroupGeometry, ...]
    num_lookahead_tokens: int


@fast_init
@dataclass(frozen=True)
class RequestState:
    """A request as the scheduler holds it."""

    request_id: str
    status: Status
    num_computed_tokens: int
    load_reported_done: bool  # the connector output reported its load finished
    num_preemptions: int


@fast_init
@dataclass(frozen=True)
class SchedulerState:
    """A scheduler at one moment: every request's state, the free blocks and the reservation."""

    requests: tuple[RequestState, ...]
    free_blocks: int


@fast_init
@dataclass(frozen=True)
class BlockAccount:
    """Where a pool's blocks are: free, held by requests (each block once), and one null."""

    pool: int
    free: int
    held: int
    holders: tuple[str, ...]  # the requests holding blocks

    def missing(self) -> int:
        """Blocks neither free, nor held, nor the null block: leaked (negative: counted twice)."""
        return self.pool - 1 - self.free - self.held

    def unbalanced(self, when: str, requests: list[str] | None = None) -> str | None:
        """What is wrong when free + held + the null block is not the pool, else None."""
        if not self.missing():
            return None
        involved = ", ".join(self.holders if requests is None else requests) or "none"
        return (
            f"{when} (requests {involved}): {self.free} free + {self.held} held + 1 null = "
            f"{self.free + self.held + 1} of {self.pool} blocks"
        )

    def not_all_free(self) -> str | None:
        """What is wrong when, every request done, some block is not free, else None."""
        if self.free == self.pool - 1:
            return None
        return (
            f"after every request finished: {self.pool - 1 - self.free} of {self.pool - 1} "
            f"blocks not free (held by {', '.join(self.holders) or 'no request'})"
        )


@fast_init
@dataclass(frozen=True)
class StepOutcome:
    """What one engine step scheduled (tokens per request) and the free blocks while it ran."""

    scheduled_tokens: dict[str, int]
    # Free blocks between schedule() and the model output: a request that finishes in this
    # step frees its blocks before the step ends, so this is where usage peaks.
    free_blocks_while_running: int
    # What vLLM's model runner would refuse in the batch (adapters/runner_protocol.py), in
    # words; "" when nothing (or when no simulated runner checks it: a live engine).
    violation: str = ""


@fast_init
@dataclass(frozen=True)
class Startable:
    """The smallest KV pool an engine serving a case's requests starts with, as the release's
    own start-up sizing decides it (the least memory its check accepts, in blocks), or why it
    cannot be computed."""

    blocks: int | None
    reason: str = ""  # why ``blocks`` is None; what the figure rests on otherwise


class SchedulerHandle(Protocol):
    """One real vLLM scheduler built for one case and pool size."""

    # Why the connector's tier could not be filled with what the case says it holds, in this
    # pool (the request that stores it cannot run to its end there), or "".
    tier_unfilled: str

    def geometry(self) -> Geometry:
        """What a reservation rule needs to know of this scheduler."""
        ...

    def add_request(self, spec: RequestSpec) -> None:
        """Adds a request as the engine would (with remote-prefill parameters for an async load)."""
        ...

    def step(
        self, finished_loads: set[str], failed_loads: frozenset[str] = frozenset()
    ) -> StepOutcome:
        """One engine step; the worker reports these loads finished or failed."""
        ...

    def abort(self, request_ids: list[str]) -> None:
        """Aborts these requests as the engine does when a client goes away."""
        ...

    def keep_arrived(self, request_ids: list[str], blocks: int) -> None:
        """The first ``blocks`` blocks of these loads arrived before they fail: the worker's
        failure report names only the rest invalid."""
        ...

    def accounting(self) -> BlockAccount:
        """Where every block of the pool is now."""
        ...

    def settled(self) -> bool:
        """Nothing left (requests, batches in flight, deferred frees) that could free blocks."""
        ...

    def connector_busy(self) -> bool:
        """Whether the connector's worker still owes a report (a store) that can free blocks."""
        ...

    def blocks_held(self, request_ids: Sequence[str]) -> tuple[tuple[int, ...], ...]:
        """Each KV cache group's blocks per request, now (read only for a picture)."""
        ...

    def group_labels(self) -> tuple[str, ...]:
        """Each KV cache group in words (its kind and block size), for a picture."""
        ...

    def state(self) -> SchedulerState:
        """Every request's state and the free blocks, now."""
        ...

    def reservation(self) -> int:
        """Blocks an async-load admission would keep free now: what the in-flight loads still
        need, and the admission's own margin. (Read when a run stops: it follows from the
        state, and counting it costs a coordinator call per load.)"""
        ...

    def install_reservation(
        self,
        admission_margin: int,
        per_request_margin: int,
        spec_tokens_through_coordinator: bool,
        admission_margin_for: Callable[[int], int] | None = None,
        admission_need_per_group: bool = False,
    ) -> None:
        """Replace this instance's async-load reservation (never the class's): an admission
        keeps free what in-flight loads still need (their remaining blocks, with their first
        speculative step through the coordinator when ``spec_tokens_through_coordinator``,
        plus ``per_request_margin`` each), plus ``admission_margin``, plus
        ``admission_margin_for(the admitting request's prompt tokens)`` when given, plus, with
        ``admission_need_per_group``, what the admitting request itself needs beyond its load,
        counted by vLLM's KV cache managers: in each non-Mamba group the blocks of its first
        speculative step beyond the load's, and one state block per Mamba ``align`` group whose
        promotion step opens a block the load did not allocate. The contract user variants
        rely on: docs/variants.md."""
        ...


class VersionAdapter(Protocol):
    """One vLLM release as the harness sees it: builds schedulers, says what cases it cannot run."""

    @property
    def release(self) -> str:
        """The installed vLLM version, and the adapter driving it when it is not known."""
        ...

    def build(self, case: CaseFile, pool: int) -> SchedulerHandle:
        """A scheduler for ``case`` with a KV pool of ``pool`` blocks."""
        ...

    def unsupported(self, case: CaseFile) -> str | None:
        """Why this release cannot run ``case`` (a feature it lacks), or None."""
        ...

    def lacks(self, case: CaseFile) -> str | None:
        """Of :meth:`unsupported`'s reasons, the one that is a feature of vLLM the case asks
        for and this release does not have (its age, not the case's fault), or None."""
        ...

    def resolve(self, case: CaseFile) -> CaseFile:
        """The case with its KV cache groups: a described model's, derived by this release."""
        ...

    def startable(self, case: CaseFile) -> Startable:
        """The smallest pool this release starts an engine with for ``case``'s requests: its
        layout with ``max_model_len`` the longest request's tokens, speculative ones included."""
        ...


@dataclass(frozen=True)
class Refused:
    """The adapter for a vLLM that cannot run the matrix at all: every case is unsupported,
    for the same reason, so callers ask one question (``unsupported``) whatever was installed."""

    reason: str
    release: str = "unsupported"

    def build(self, case: CaseFile, pool: int) -> SchedulerHandle:
        """Raises :class:`UnsupportedRelease`: this vLLM builds no scheduler."""
        raise UnsupportedRelease(self.reason)

    def unsupported(self, case: CaseFile) -> str | None:
        """The reason this vLLM cannot run the matrix, whatever the case."""
        return self.reason

    def lacks(self, case: CaseFile) -> str | None:
        """None: a vLLM the matrix cannot drive fails every run, whatever the case asks."""
        return None

    def resolve(self, case: CaseFile) -> CaseFile:
        """The case unchanged: without a release, no layout is derived."""
        return case

    def startable(self, case: CaseFile) -> Startable:
        """No figure: without a release there is no start-up sizing."""
        return Startable(None, self.reason)
