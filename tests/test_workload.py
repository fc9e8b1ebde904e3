"""A workload case: requests drawn from a seed, arriving over time, swept from vLLM's start-up
pool, and the run that waits for them (and for a load the remote side completes later)."""

from __future__ import annotations

from typing import Any

import pytest

from matrix.case.expansion import cells_from_file
from matrix.case.reading import CaseFileError
from matrix.case.workload import Workload, workload_requests
from matrix.report.costs import workload_table
from tests.helpers import CASES, WriteCase, needs_vllm, verdict_of

WORKLOAD = """\
name: stream
groups:
  - {kind: full, block_size: 16}
connector: multi
pool: {above_startable: 1}
workload:
  requests: 4
  prompt: {min: 32, max: 64}
  mix: {remote: 1, stored: 1, local: 1}
  arrive_every: 2
"""


def test_the_same_workload_draws_the_same_requests() -> None:
    workload = Workload.model_validate(
        {"requests": 6, "seed": 3, "prompt": {"min": 32, "max": 64}, "mix": {"stored": 1}}
    )
    drawn = workload_requests(workload)
    assert drawn == workload_requests(workload)
    assert [r["arrive_after"] for r in drawn] == [0, 1, 2, 3, 4, 5]
    assert all(32 <= r["prompt"] <= 64 and not r["async_load"] for r in drawn)
    assert all(r["prompt"] // 4 <= r["stored"]["tokens"] <= r["prompt"] * 3 // 4 for r in drawn)
    other = workload.model_copy(update={"seed": 4})
    assert workload_requests(other) != drawn


def test_a_workload_case_is_checked_at_its_keys(write_case: WriteCase) -> None:
    (cell, *_) = cells_from_file(write_case(WORKLOAD))
    assert [r.id for r in cell.case.definition.requests] == ["w00", "w01", "w02", "w03"]
    with pytest.raises(
        CaseFileError, match=r"workload: mix: at least one kind with a weight above 0$"
    ):
        cells_from_file(write_case(WORKLOAD.replace("remote: 1, stored: 1, local: 1", "local: 0")))
    both = WORKLOAD + "requests:\n  - {id: a, prompt: 16}\n"
    with pytest.raises(CaseFileError, match="give `workload:` or `requests:`, not both"):
        cells_from_file(write_case(both))
    late = WORKLOAD.replace("arrive_every: 2", "arrive_every: 60") + (
        "events:\n  - run: {max_steps: 100}\n"
    )
    with pytest.raises(CaseFileError, match=r"arrives after 120 steps, but the run ends after 100"):
        cells_from_file(write_case(late))


@needs_vllm
def test_a_stream_runs_from_vllm_s_start_up_pool_and_is_tabled(
    adapter: Any, write_case: WriteCase
) -> None:
    """The requests arrive as the run goes, the pools start at ``startable``, and the cells'
    costs give the Workloads table."""
    from matrix.judge.result import result_of

    cells = [c for c in cells_from_file(write_case(WORKLOAD)) if c.variant in ("stock", "fixed")]
    results = [result_of(cell, verdict_of(adapter, cell)) for cell in cells]
    stock = results[0]
    assert stock.observed == "pass" and stock.workload
    assert stock.swept == (stock.startable, (stock.startable or 0) + 1)
    header, rows = workload_table(results)
    assert header[:4] == ["case", "variant", "pool", "steps"] and len(rows) == 4
    assert {row[1] for row in rows} == {"stock", "fixed"}


def test_the_shipped_workload_is_a_valid_case() -> None:
    cells = cells_from_file(CASES / "workload_partial_loads.yaml")
    assert len(cells) == 7 and len(cells[0].case.definition.requests) == 12


@needs_vllm
def test_a_finished_run_counts_the_preemptions_it_had(adapter: Any) -> None:
    """Issue 45 item 1: the shipped workload under ``none`` preempts w03 twice at pool 15;
    its cost read the last step, where every request has finished and counts none."""
    from matrix.judge.cost import PoolCost

    (cell,) = [
        c for c in cells_from_file(CASES / "workload_partial_loads.yaml") if c.variant == "none"
    ]
    costs = {cost.pool: cost for cost in map(PoolCost.from_text, verdict_of(adapter, cell).costs)}
    assert costs[15].preemptions == 2
    assert all(cost.preemptions == 0 for pool, cost in costs.items() if pool != 15)
