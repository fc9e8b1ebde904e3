"""What the store and offload connectors share: a request loads what the connector's tier
holds of its prompt (``stored``, else its whole prompt when ``async_load``), put there by an
earlier request of those tokens that ran on the same engine (``Handle`` runs it before the
case starts), and none of them fails a load."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vllm.sampling_params import SamplingParams

from matrix.adapters.protocol import ample_pool
from matrix.case.connector import PREFILL_CONNECTORS
from matrix.case.events import FailLoadEvent
from matrix.case.format import CaseFile
from matrix.case.parts import RequestSpec


class TierSide:
    """The part of a store or offload connector's side that is the same for all of them."""

    def __init__(self, case: CaseFile) -> None:
        self.case = case
        self.counter: Any = None  # a PinCounter, where the connector pins blocks

    def transfer_params(self, spec: RequestSpec) -> dict[str, Any] | None:
        """None: the connector finds a request's prefix by its block hashes."""
        return None

    def tier_tokens(self, spec: RequestSpec) -> int:
        """What the tier holds of the prompt: ``stored``, or the whole prompt of a request
        that loads (``async_load``), as if an earlier request of the same prompt stored it."""
        if spec.stored is not None:
            return spec.stored.tokens
        return spec.prompt_tokens() if spec.async_load else 0

    def write_tier(self, block_hashes: list[Any], tokens: int) -> bool:
        """False: this tier is filled by running a request."""
        return False

    def pinned(self) -> frozenset[int]:
        """The GPU blocks the connector references through the block pool."""
        return self.counter.pinned() if self.counter is not None else frozenset()


def tier_unsupported(case: CaseFile, vllm_name: str, why: str) -> str | None:
    """A failed load is not something this connector reports: a case that fails loads, or
    sets a failure policy, tests nothing of it."""
    if any(isinstance(event, FailLoadEvent) for event in case.events):
        return f"{vllm_name} has no load-failure path ({why}): fail_load does not apply"
    if case.engine.kv_load_failure_policy is not None:
        return (
            f"{vllm_name} has no load-failure path ({why}): kv_load_failure_policy does not apply"
        )
    return None


def tier_found(handle: Any, case: CaseFile) -> bool | None:
    """Whether the connector of ``handle`` (built for ``case``, its tier warmed) finds any of
    what its tier holds when the case starts: vLLM's own lookup, asked as the scheduler asks
    it (the request added, after its local hit), for every request whose stores are
    complete. None: no such request (a prefill connector, a tier filled in flight). The
    handle is spent."""
    scheduler = handle.scheduler
    asked = False
    for spec in case.requests:
        if handle.side.tier_tokens(spec) <= 0 or (
            spec.stored is not None and spec.stored.in_flight
        ):
            continue
        params = SamplingParams(max_tokens=1, ignore_eos=True)
        request = handle.request_of(f"{spec.id}~probe", handle.prompt_of(spec), params)
        scheduler.add_request(request)  # a connector may track a request from its arrival
        local = scheduler.kv_cache_manager.get_computed_blocks(request)[1]
        matched, _ = scheduler.connector.get_num_new_matched_tokens(request, local)
        if matched is None or matched > 0:  # None: it would answer later, so it may load
            return True
        asked = True
    return False if asked else None


# Whether a case's tier connector finds what its tier holds, per case (its JSON): every cell
# of a case asks, and each answer builds a scheduler and warms its tier.
_found: dict[str, bool | None] = {}


def never_loads(build: Callable[[CaseFile, int], Any], case: CaseFile) -> str | None:
    """Why a tier connector would load nothing in ``case`` (its lookup finds none of what the
    tier holds, on this release), or None; ``build`` makes a warmed scheduler of the case.
    A cell there would pass without testing a load."""
    if case.connector in PREFILL_CONNECTORS:
        return None
    key = case.model_dump_json()
    if key not in _found:
        try:
            _found[key] = tier_found(build(case, ample_pool(case)), case)
        except Exception:  # the cell's own run reports what raised
            _found[key] = None
    if _found[key] is False:
        return (
            f"the {case.connector} connector's lookup finds none of what its tier holds "
            "in this case (0 tokens for every stored request): it would never load"
        )
    return None
