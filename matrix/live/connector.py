"""The live engine's KV connector, loaded by vLLM through ``kv_connector_module_path``: a test
connector. **No KV bytes move.**

- **Scheduler side**: NIXL's own (``NixlConnector`` in the scheduler role, which needs no nixl
  package). A request with NIXL's remote-prefill parameters is claimed as an async load of what
  NIXL claims on that release (the prompt, or all but its last token where the release backs
  off), exactly as in the harness, which drives the same class.
- **Worker side**: this module's, in place of NIXL's transfer agent. It registers nothing,
  transfers nothing, and reports a load finished when :data:`REPORTS` says so: the live run
  asks for it at the step the case's events (or ``complete_load_after``) say, as the harness's
  simulated worker does. The model then runs on whatever the loaded blocks hold.

It subclasses NIXL's connector, so vLLM treats it as NIXL (``SupportsHMA``: the hybrid KV
cache manager stays on; the same request bookkeeping). It runs in the engine's own process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``, one worker), so :data:`REPORTS` is shared with the run.
"""

from __future__ import annotations

from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorRole,
    KVConnectorTransferResults,
)
from vllm.distributed.kv_transfer.kv_connector.v1.nixl import NixlConnector

CONNECTOR_NAME = "MatrixLiveConnector"


class LoadReports:
    """The loads the worker side reports finished at its next transfer check, and those it did."""

    def __init__(self) -> None:
        self.due: set[str] = set()  # engine request ids
        self.reported: set[str] = set()

    def take(self) -> set[str]:
        """The loads due now, marked reported."""
        due, self.due = self.due, set()
        self.reported |= due
        return due

    def clear(self) -> None:
        """Forgets every load (a fresh scheduler starts with none)."""
        self.due.clear()
        self.reported.clear()


REPORTS = LoadReports()


class MatrixLiveConnector(NixlConnector):  # type: ignore[misc]
    """NIXL's scheduler side; a worker side that moves nothing and reports loads on cue."""

    def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None) -> None:
        if role == KVConnectorRole.SCHEDULER:
            super().__init__(vllm_config, role, kv_cache_config)
            return
        KVConnectorBase_V1.__init__(self, vllm_config, role, kv_cache_config)
        self.connector_scheduler = None
        self.connector_worker = None

    @classmethod
    def get_required_kvcache_layout(cls, vllm_config: Any) -> None:
        """No layout: no bytes are transferred, so the attention backend's own stands."""
        return None

    # The worker side: nothing to register, load or save.

    def register_kv_caches(self, kv_caches: Any) -> None:
        """Nothing to register: no bytes move."""

    def set_host_xfer_buffer_ops(self, copy_operation: Any) -> None:
        """Nothing to copy: no bytes move."""

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        """Nothing to load: the run says when a load is finished."""

    def wait_for_layer_load(self, layer_name: str) -> None:
        """Nothing to wait for."""

    def save_kv_layer(
        self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any
    ) -> None:
        """Nothing to save."""

    def wait_for_save(self) -> None:
        """Nothing to wait for."""

    def get_transfer_results(self, finished_req_ids: set[str]) -> Any:
        """The loads :data:`REPORTS` says are finished now."""
        return KVConnectorTransferResults(finished_recving=REPORTS.take())

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str], set[str]]:
        """Nothing sent; the loads finished now (for callers of the older interface)."""
        return set(), REPORTS.take()

    def get_block_ids_with_load_errors(self) -> set[int]:
        """No load fails."""
        return set()

    def get_kv_connector_stats(self) -> None:
        """No transfer statistics."""
        return None

    def get_handshake_metadata(self) -> None:
        """No handshake: there is no remote side."""
        return None

    def shutdown(self) -> None:
        """Shuts NIXL's scheduler side down (the worker side holds nothing)."""
        if self.connector_scheduler is not None:
            super().shutdown()
