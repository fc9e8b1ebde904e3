"""The P/D connectors, whose decode side loads the whole prompt a prefill instance computed:
NIXL (pull: the default, today's cells exactly), NIXL push, Mooncake (P2P) and MoRIIO
(WRITE mode). A request that loads carries the prefill instance's ``kv_transfer_params``;
the worker reports its load done when the case says, failed through the connector's own
split (request ids under the hybrid manager's per-group transfers, block ids otherwise).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from vllm.v1.outputs import KVConnectorOutput

from matrix.adapters.connectors.base import ConnectorSide
from matrix.adapters.requests import remote_prefill
from matrix.case.format import CaseFile
from matrix.case.parts import RequestSpec


class PrefillSide:
    """One scheduler's P/D connector: the prefill instance's parameters per request, and the
    worker's load reports (no tier, no stores)."""

    def __init__(self, scheduler: Any, connector: Any, extra_params: dict[str, Any]) -> None:
        self.scheduler = scheduler
        self.connector = connector
        self.extra_params = extra_params
        # Per failing load: the blocks of the first group that arrived before it failed.
        self.arrived: dict[str, int] = {}

    def transfer_params(self, spec: RequestSpec) -> dict[str, Any] | None:
        """NIXL's remote-prefill parameters (and the connector's own extra ones) if it loads."""
        if not spec.async_load:
            return None
        return {**remote_prefill(spec.id, spec.prompt_tokens()), **self.extra_params}

    def tier_tokens(self, spec: RequestSpec) -> int:
        """0: a prefill instance holds the whole prompt, no tier of this engine does."""
        return 0

    def write_tier(self, block_hashes: list[Any], tokens: int) -> bool:
        """No tier to write."""
        return False

    def report(self, output: Any, finished: set[str], failed: set[str]) -> KVConnectorOutput | None:
        """NIXL's report: a failed load is done and failed; without per-group transfers it
        also names the request's unhashed blocks of the first group as invalid."""
        if not finished and not failed:
            return None
        invalid: set[int] = set()
        if failed and not self._hybrid_transfer():
            manager = self.scheduler.kv_cache_manager.coordinator.single_type_managers[0]
            for request_id in failed:
                blocks = manager.req_to_blocks.get(request_id, ())[
                    self.arrived.get(request_id, 0) :
                ]
                invalid |= {
                    block.block_id
                    for block in blocks
                    if block.block_hash is None and not block.is_null
                }
        return KVConnectorOutput(
            finished_recving=finished | failed,
            failed_recving=set(failed),
            invalid_block_ids=invalid,
        )

    def _hybrid_transfer(self) -> bool:
        """NIXL's own rule, read from its scheduler side: transfers per KV cache group."""
        side = getattr(self.connector, "connector_scheduler", None)
        return bool(getattr(side, "_is_hma_required", True))

    def busy(self) -> bool:
        """Nothing owed: a load is reported when the case says."""
        return False

    def pinned(self) -> frozenset[int]:
        """A P/D decode side pins no block outside the block tables."""
        return frozenset()

    def hold_stores(self, delay: int | None) -> None:
        """No stores."""


class NotifyingSide(PrefillSide):
    """A P/D decode side that tells the prefill instance which blocks to write into (MoRIIO's
    WRITE mode, over ZMQ): the prefill instance is simulated, so its notify socket is
    answered in process, each message recorded, none sent."""

    def __init__(self, scheduler: Any, connector: Any, extra_params: dict[str, Any]) -> None:
        super().__init__(scheduler, connector, extra_params)
        self.notified: list[str] = []  # the requests whose blocks the prefill instance was sent
        connector.connector_scheduler.send_notify_block = self._notify

    def _notify(self, req_id: str, *args: Any, **kwargs: Any) -> None:
        self.notified.append(req_id)


@dataclass(frozen=True)
class PrefillFamily:
    """A P/D connector: its vLLM name, its role, what its parameters add to NIXL's, and what
    it cannot do."""

    name: str
    vllm_name: str
    extra_params: tuple[tuple[str, Any], ...] = ()
    extra_config: tuple[tuple[str, Any], ...] = ()
    needs_module: str = ""  # a package its scheduler side imports that vLLM does not require
    notifies: bool = False  # the decode side sends the prefill instance its blocks (WRITE)
    # The exceptions its scheduler side raises when built for a layout or a speculative
    # method it does not take (each release its own list): such a case is unsupported.
    refusals: tuple[str, ...] = ()

    def transfer_config(self, case: CaseFile) -> dict[str, Any]:
        """The connector as a consumer (a decode instance)."""
        settings: dict[str, Any] = {"kv_connector": self.vllm_name, "kv_role": "kv_consumer"}
        if self.extra_config:
            settings["kv_connector_extra_config"] = dict(self.extra_config)
        return settings

    def unsupported(self, case: CaseFile) -> str | None:
        """A package it imports that is not installed (what its scheduler side refuses when
        built, ``refusals``, is asked by ``adapters/construction.py``, above the blueprint)."""
        if self.needs_module and importlib.util.find_spec(self.needs_module) is None:
            return (
                f"{self.vllm_name}'s scheduler side imports '{self.needs_module}', which is "
                "not installed (pip install it to run these cells)"
            )
        return None  # its refusals when built: adapters/construction.py

    def tensor_block_bytes(self) -> int:
        """0: its scheduler side reads no tensors."""
        return 0

    def attach(self, connector: Any, scheduler: Any, case: CaseFile) -> ConnectorSide:
        """The harness's side of the connector."""
        side = NotifyingSide if self.notifies else PrefillSide
        return side(scheduler, connector, dict(self.extra_params))


NIXL = PrefillFamily("nixl", "NixlConnector")
# Push mode reads the prefill instance's tensor-parallel size from the parameters.
NIXL_PUSH = PrefillFamily("nixl_push", "NixlPushConnector", extra_params=(("tp_size", 1),))
MOONCAKE = PrefillFamily(
    "mooncake", "MooncakeConnector", extra_params=(("tp_size", 1),), needs_module="uvicorn"
)
# MoRIIO's WRITE mode names the transfer, and the prefill instance's port it notifies.
MORIIO = PrefillFamily(
    "moriio",
    "MoRIIOConnector",
    extra_params=(("tp_size", 1), ("transfer_id", "transfer-0"), ("remote_notify_port", 1)),
    extra_config=(("moriio_mode", "write"),),
    needs_module="msgpack",
    notifies=True,
    refusals=("NotImplementedError", "MoRIIOError"),
)
