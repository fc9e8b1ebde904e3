"""``MultiConnector`` over the case's children: vLLM's own composition (the first child with
a hit loads; every child sees every request and stores what it stores). Each child's side is
its family's; the worker's report is theirs together, each child's metadata in its place of
``MultiKVConnectorWorkerMetadata``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.multi_connector import (
    MultiKVConnectorWorkerMetadata,
)
from vllm.v1.outputs import KVConnectorOutput

from matrix.adapters.connectors.base import ConnectorFamily, ConnectorSide
from matrix.adapters.connectors.prefill import PrefillFamily
from matrix.case.connector import children_of
from matrix.case.events import FailLoadEvent
from matrix.case.format import CaseFile
from matrix.case.parts import RequestSpec


class MultiSide:
    """The children's sides of one scheduler's ``MultiConnector``."""

    def __init__(self, children: list[ConnectorSide]) -> None:
        self.children = children

    def transfer_params(self, spec: RequestSpec) -> dict[str, Any] | None:
        """The first child's parameters that has any (a prefill instance's)."""
        return next(
            (p for p in (c.transfer_params(spec) for c in self.children) if p is not None), None
        )

    def tier_tokens(self, spec: RequestSpec) -> int:
        """What a tier child holds, unless a prefill child loads the whole prompt first."""
        if self.transfer_params(spec) is not None:
            return 0
        return max(c.tier_tokens(spec) for c in self.children)

    def write_tier(self, block_hashes: list[Any], tokens: int) -> bool:
        """Written directly only if every tier child can be."""
        return all([c.write_tier(block_hashes, tokens) for c in self.children])

    def report(self, output: Any, finished: set[str], failed: set[str]) -> KVConnectorOutput | None:
        """Every child's report on its own metadata, as one output."""
        meta = output.kv_connector_metadata
        parts = []
        for index, child in enumerate(self.children):
            own = _with_metadata(output, meta.metadata[index] if meta is not None else None)
            parts.append(child.report(own, finished, failed))
        if all(part is None for part in parts):
            return None
        reported = [part for part in parts if part is not None]
        worker_metas = tuple(p.kv_connector_worker_meta if p else None for p in parts)
        return KVConnectorOutput(
            finished_recving=set().union(*(p.finished_recving or set() for p in reported)),
            failed_recving=set().union(*(p.failed_recving for p in reported)),
            invalid_block_ids=set().union(*(p.invalid_block_ids for p in reported)),
            kv_connector_worker_meta=(
                MultiKVConnectorWorkerMetadata(metadata=worker_metas)
                if any(m is not None for m in worker_metas)
                else None
            ),
        )

    def busy(self) -> bool:
        """Any child's."""
        return any(c.busy() for c in self.children)

    def pinned(self) -> frozenset[int]:
        """Every child's."""
        return frozenset().union(*(c.pinned() for c in self.children))

    def hold_stores(self, delay: int | None) -> None:
        """Every child's."""
        for child in self.children:
            child.hold_stores(delay)


def _failures_are_prefills(
    case: CaseFile, before: list[ConnectorFamily], child: ConnectorFamily
) -> bool:
    """Whether ``child`` refuses ``case`` only for its failed loads and failure policy, and
    every failed load is an ``async_load`` request a prefill child in ``before`` loads."""
    if not any(isinstance(family, PrefillFamily) for family in before):
        return False
    failing = {r for e in case.events if isinstance(e, FailLoadEvent) for r in e.fail_load}
    if not all(spec.async_load for spec in case.requests if spec.id in failing):
        return False
    events = [e for e in case.events if not isinstance(e, FailLoadEvent)]
    engine = case.engine.model_copy(update={"kv_load_failure_policy": None})
    return child.unsupported(case.model_copy(update={"events": events, "engine": engine})) is None


class _WithMetadata:
    """A scheduler output as one child sees it: its own metadata."""

    def __init__(self, output: Any, metadata: Any) -> None:
        self._output = output
        self.kv_connector_metadata = metadata

    def __getattr__(self, name: str) -> Any:
        return getattr(self._output, name)


def _with_metadata(output: Any, metadata: Any) -> Any:
    return _WithMetadata(output, metadata)


@dataclass(frozen=True)
class Multi:
    """``MultiConnector``; ``families`` gives each child's family by name."""

    families: dict[str, ConnectorFamily]
    name: str = "multi"

    def children(self, case: CaseFile) -> list[ConnectorFamily]:
        """The connectors it holds, in order (connector_options.connectors)."""
        return [self.families[name] for name in children_of("multi", case.connector_options)]

    def transfer_config(self, case: CaseFile) -> dict[str, Any]:
        """Both roles; each child's config, in order."""
        children = [
            {**child.transfer_config(case), "kv_role": "kv_both"} for child in self.children(case)
        ]
        return {
            "kv_connector": "MultiConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": {"connectors": children},
        }

    def unsupported(self, case: CaseFile) -> str | None:
        """A child's reason, named. A tier child without a load-failure path does not refuse
        failed loads that a prefill child before it loads: vLLM gives a request to the first
        child with a hit, and a prefill child has the whole prompt of every ``async_load``
        request."""
        children = self.children(case)
        for index, child in enumerate(children):
            reason = child.unsupported(case)
            if reason and not _failures_are_prefills(case, children[:index], child):
                return f"MultiConnector's child {child.name}: {reason}"
        return None

    def tensor_block_bytes(self) -> int:
        """A child's that reads tensors."""
        return max(f.tensor_block_bytes() for f in self.families.values())

    def attach(self, connector: Any, scheduler: Any, case: CaseFile) -> ConnectorSide:
        """Each child attached to vLLM's child connector, in order."""
        return MultiSide(
            [
                family.attach(child, scheduler, case)
                for family, child in zip(self.children(case), connector._connectors, strict=True)
            ]
        )
