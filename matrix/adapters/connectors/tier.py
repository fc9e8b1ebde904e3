"""What the store and offload connectors share: a request loads what the connector's tier
holds of its prompt (``stored``, else its whole prompt when ``async_load``), put there by an
earlier request of those tokens that ran on the same engine (``Handle`` runs it before the
case starts), and none of them fails a load."""

from __future__ import annotations

from typing import Any

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
