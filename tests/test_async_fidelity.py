"""Async scheduling against sync scheduling on the shipped table cases: AsyncScheduler, driven
as EngineCore.step_with_batch_queue drives it, must stall at exactly the pools the synchronous
scheduler stalls at, variant by variant. A difference is reported per case, variant and pool."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from matrix.case.engine import Engine
from matrix.case.expansion import Cell, case_files, cells_from_file
from matrix.judge.verdict import Verdict
from tests.helpers import CASES, needs_vllm, shipped_verdict, verdict_of

pytestmark = needs_vllm

TABLE_CELLS = [
    cell
    for path in case_files(CASES)
    for cell in cells_from_file(path)
    if cell.case.column is not None and cell.case.definition.engine == Engine()
]


def with_async(cell: Cell) -> Cell:
    spec = cell.case.definition.model_copy(update={"engine": Engine(async_scheduling=True)})
    return dataclasses.replace(cell, case=dataclasses.replace(cell.case, definition=spec))


def pools_by_kind(verdict: Verdict) -> dict[str, list[int]]:
    kinds: dict[str, list[int]] = {}
    for outcome in verdict.outcomes:
        kinds.setdefault(outcome.kind, []).append(outcome.pool)
    if not verdict.outcomes:  # the case could not run at all (an error before any pool)
        kinds[verdict.kind] = []
    return kinds


@pytest.mark.parametrize("cell", TABLE_CELLS, ids=[c.test_id for c in TABLE_CELLS])
def test_async_stalls_where_sync_does(adapter: Any, cell: Cell) -> None:
    for unsupported in (adapter.unsupported(c.case.definition) for c in (cell, with_async(cell))):
        if unsupported:
            pytest.skip(unsupported)
    sync = pools_by_kind(shipped_verdict(adapter, cell))
    asynchronous = pools_by_kind(verdict_of(adapter, with_async(cell)))
    assert asynchronous.get("stall", []) == sync.get("stall", []), (
        f"{cell.test_id}: stall pools differ, sync {sync} vs async {asynchronous}"
    )
    assert asynchronous == sync, (
        f"{cell.test_id}: outcomes differ, sync {sync} vs async {asynchronous}"
    )
