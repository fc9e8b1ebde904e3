"""What a connector family is to the harness (:class:`ConnectorFamily`), what one
scheduler's connector is to the engine loop (:class:`ConnectorSide`), and what they share:
the worker's delayed store reports (:class:`StoreReports`) and the GPU blocks a connector
references through the block pool (:class:`PinCounter`).

Only the worker side and the tier's contents are the harness's; the connector's scheduler
side is vLLM's own class, built by vLLM's factory from the ``KVTransferConfig`` a family
gives (docs/connectors.md says what each family simulates).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Protocol

from vllm.v1.outputs import KVConnectorOutput

from matrix.case.format import CaseFile
from matrix.case.parts import RequestSpec


class ConnectorSide(Protocol):
    """One scheduler's connector as the engine loop drives it: what a request carries, what
    its tier holds, and the worker's report after each step."""

    def transfer_params(self, spec: RequestSpec) -> dict[str, Any] | None:
        """The request's ``kv_transfer_params`` (a prefill instance's parameters), or None."""
        ...

    def tier_tokens(self, spec: RequestSpec) -> int:
        """How many of the request's prompt tokens the tier holds when the case starts."""
        ...

    def write_tier(self, block_hashes: list[Any], tokens: int) -> bool:
        """Puts a prompt's first ``tokens`` tokens in the tier directly (a shared store that
        another instance filled); False when the tier is filled by running a request."""
        ...

    def report(self, output: Any, finished: set[str], failed: set[str]) -> KVConnectorOutput | None:
        """The worker's connector output for the batch ``output`` (a ``SchedulerOutput``):
        these loads finished or failed, and the stores and jobs now due."""
        ...

    def busy(self) -> bool:
        """Whether the worker still owes a report (a store, a job) for work it was given."""
        ...

    def pinned(self) -> frozenset[int]:
        """GPU block ids the connector holds a reference on, outside every block table."""
        ...

    def hold_stores(self, delay: int | None) -> None:
        """None: no store is reported done until released; a number: released, every store
        in flight reported that many steps from now (a tier's stores in flight)."""
        ...


class ConnectorFamily(Protocol):
    """One connector (or a MultiConnector of them) as the harness configures and drives it."""

    @property
    def name(self) -> str:
        """The case's ``connector:`` name."""
        ...

    def transfer_config(self, case: CaseFile) -> dict[str, Any]:
        """``KVTransferConfig``'s arguments for the case (JSON values only)."""
        ...

    def unsupported(self, case: CaseFile) -> str | None:
        """Why the connector would not load in this case (it refuses the layout, disables
        itself, has no path the case needs), or None."""
        ...

    def tensor_block_bytes(self) -> int:
        """The bytes a block of a metadata-only ``KVCacheConfig.kv_cache_tensors`` entry its
        scheduler side reads (0: it reads none)."""
        ...

    def attach(self, connector: Any, scheduler: Any, case: CaseFile) -> ConnectorSide:
        """The harness's side of vLLM's ``connector`` (a scheduler's, or a MultiConnector's
        child) in ``scheduler``."""
        ...


class PinCounter:
    """The GPU block pool as a connector sees it: every call forwarded to vLLM's own pool,
    and the references the connector takes (``touch``) and drops (``free_blocks``) counted,
    so the block accounting can tell a connector's pin from a leak."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self.counts: Counter[int] = Counter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    def touch(self, blocks: Iterable[Any], *args: Any, **kwargs: Any) -> Any:
        """vLLM's ``touch``, counted."""
        blocks = list(blocks)
        self.counts.update(block.block_id for block in blocks)
        return self._pool.touch(blocks, *args, **kwargs)

    def free_blocks(self, blocks: Iterable[Any], *args: Any, **kwargs: Any) -> Any:
        """vLLM's ``free_blocks``, counted."""
        blocks = list(blocks)
        self.counts.subtract(block.block_id for block in blocks)
        return self._pool.free_blocks(blocks, *args, **kwargs)

    def pinned(self) -> frozenset[int]:
        """Blocks the connector references now."""
        return frozenset(block for block, count in self.counts.items() if count > 0)


def bind_counted_pool(connector: Any, scheduler: Any) -> PinCounter:
    """Rebinds ``connector`` to a counted view of the scheduler's block pool."""
    counter = PinCounter(scheduler.kv_cache_manager.block_pool)
    connector.bind_gpu_block_pool(counter)
    return counter


class StoreReports:
    """The worker's stores: each reported done ``delay`` steps after the step whose
    metadata issued it (the request's ``complete_store_after``), unless held."""

    def __init__(self, delays: dict[str, int]) -> None:
        self.delays = delays
        self.step = 0
        self.held = False
        self._due: dict[Any, int] = {}  # a store's key -> the step it is reported in

    def issue(self, key: Any, request_ids: Iterable[str]) -> None:
        """A store the step's metadata issued for these requests: reported after the
        longest of their delays (a store of no request the case names: the case's longest)."""
        longest = max(self.delays.values(), default=1)
        delay = max((self.delays.get(r, longest) for r in request_ids), default=longest)
        self._due.setdefault(key, self.step + delay)

    def release(self, delay: int) -> None:
        """Stops holding: every store in flight is reported ``delay`` steps from now."""
        self.held = False
        self._due = dict.fromkeys(self._due, self.step + delay)

    def finish_now(self, key: Any) -> None:
        """The worker waits for this store (a flush): due now, if in flight."""
        if key in self._due:
            self._due[key] = self.step

    def finish_all(self) -> None:
        """The worker waits for every store in flight (a flush): all due now."""
        self._due = dict.fromkeys(self._due, self.step)

    def take_due(self) -> list[Any]:
        """The stores reported in this step's output."""
        if self.held:
            return []
        due = [key for key, step in self._due.items() if step <= self.step]
        for key in due:
            del self._due[key]
        return due

    def pending(self) -> bool:
        """Stores not reported yet."""
        return bool(self._due)


def store_delays(case: CaseFile) -> dict[str, int]:
    """Each request's ``complete_store_after``."""
    return {r.id: r.complete_store_after for r in case.requests}
