"""What a variant costs: a finished run's steps, preemptions and load waits read from its trace,
kept as a line a pool, compared with stock's pool by pool, and tabled; a report whose costs are
not costs is refused at the key. No vLLM needed."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from matrix.judge.cost import LoadWait, PoolCost, difference, pool_cost, run_costs
from matrix.report.costs import cost_details, cost_table
from matrix.report.release_reports import ReportError
from matrix.report.report_data import read_report
from tests.test_pictures import passing_cell
from tests.test_verdict import request, trace

LOADING = "WAITING_FOR_REMOTE_KVS"


def test_a_finished_run_costs_its_steps_preemptions_and_load_waits() -> None:
    run = trace(
        (request("a", LOADING), request("b", "WAITING")),
        (request("a", "RUNNING"), request("b", "WAITING")),
        (request("a", "RUNNING", preemptions=1), request("b", LOADING)),
        # A finished request has left the scheduler: its record counts no preemption.
        (request("a", "FINISHED"), request("b", "FINISHED")),
        stopped="finished",
        pool=13,
    )
    cost = pool_cost(run)
    assert cost == PoolCost(13, 4, 1, (LoadWait("a", 1, 0), LoadWait("b", 3, 2)), (4, 4))
    assert cost.waited == 2 and cost.to_text() == "13 4 1 a@1+0 b@3+2 / 4 4"
    assert PoolCost.from_text(cost.to_text()) == cost
    assert pool_cost(replace(run, stopped="stuck")) is None
    assert run_costs([run, replace(run, stopped="stuck", pool=12)]) == (cost.to_text(),)
    assert PoolCost.from_text("13 4 1").completions == ()  # a cost written before completions


def test_a_request_arriving_later_is_timed_from_its_arrival() -> None:
    late = trace(
        (request("a", "RUNNING"),),
        (request("a", "FINISHED"), request("b", LOADING)),
        (request("a", "FINISHED"), request("b", "RUNNING")),
        (request("a", "FINISHED"), request("b", "FINISHED")),
        stopped="finished",
    )
    cost = pool_cost(late)
    assert cost is not None and cost.loads == (LoadWait("b", 2, 0),)
    assert cost.completions == (2, 3) and cost.mean_completion == 2.5
    assert cost.tail_completion == 3
    with pytest.raises(ValueError, match="not a load"):
        PoolCost.from_text("13 4 1 a@1")


def test_a_variant_is_compared_with_stock_where_both_finished() -> None:
    stock = ["12 9 0", "13 9 0 a@1+0 b@4+3", "16 9 0 a@1+0 b@1+0"]
    variant = ["13 10 0 a@1+0 b@5+4", "16 11 1 a@1+0 b@1+0", "20 8 0"]
    diff = difference(variant, stock)
    assert diff.compared == (13, 16)
    assert (diff.slower, diff.faster, diff.more_preemptions) == ((13, 16), (), (16,))
    assert (diff.most_steps, diff.most_preemptions, diff.longer_waits) == (2, 1, (13,))
    assert difference(stock, stock).same


def test_the_tables_say_which_variant_costs_more_than_stock() -> None:
    stock = replace(passing_cell(variant="stock"), costs=("13 9 0", "16 9 0"))
    slower = replace(passing_cell(variant="proposed"), costs=("13 10 0", "16 9 0"))
    same = replace(passing_cell(variant="fixed"), costs=("13 9 0", "16 9 0"))
    header, rows = cost_table([stock, slower, same])
    assert header[:3] == ["variant", "cells compared", "slower (steps)"]
    assert rows == [
        ["fixed", "1", "0", "0", "0", "0"],
        ["proposed", "1", "1 (up to +1)", "0", "0", "0"],
    ]
    _, details = cost_details([stock, slower, same])
    assert details == [["small[k=1]-proposed", "13 (+1)", "", "", ""]]


def test_a_report_whose_costs_are_not_costs_is_refused_at_the_key(tmp_path: Path) -> None:
    cell = {**passing_cell().to_dict(), "costs": ["13 9 0", "13 nine 0"]}
    path = tmp_path / "vllm-0.33.0.json"
    report = {"vllm_version": "0.33.0", "ships": "fixed", "cells": [cell], "tightness": {}}
    path.write_text(json.dumps(report))
    with pytest.raises(ReportError, match=r"cells\.0\.costs\.1: '13 nine 0' is not a pool"):
        read_report(path)
