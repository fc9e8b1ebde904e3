"""Oracles on decisions, not only outcomes: loads a case expects in flight together
(``concurrency:``, judged per pool from records alone), the ``promoted`` state, and the
engine settings that turn admission rules on (``engine.watermark``, ...)."""

from __future__ import annotations

from typing import Any

import pytest

from matrix.adapters.protocol import RequestState, SchedulerState, Startable
from matrix.case.events import StateExpectation
from matrix.case.expansion import cells_from_file
from matrix.case.loading import CaseFileError
from matrix.judge.result import result_of
from matrix.judge.tightness import concurrency_delay, in_flight_together
from matrix.judge.verdict import judge_run
from matrix.run.play_events import unmet_expectation
from matrix.run.records import CellRun, RunTrace, StepRecord, Together
from tests.helpers import WriteCase, assert_one_line_error, needs_vllm, replaced

LOADING, WAITING, RUNNING = "WAITING_FOR_REMOTE_KVS", "WAITING", "RUNNING"


def run_at(pool: int, together: bool) -> RunTrace:
    """A finished run of two loads: both admitted at step 1, or the second after the first ran."""
    first = (
        RequestState("a", LOADING, 16, False, 0),
        RequestState("b", LOADING if together else WAITING, 16 if together else 0, False, 0),
    )
    second = (RequestState("a", RUNNING, 17, True, 0), RequestState("b", LOADING, 16, False, 0))
    records = tuple(
        StepRecord(i + 1, (), SchedulerState(state, 1), 1)
        for i, state in enumerate((first, second))
    )
    return RunTrace(pool, records, "finished")


def cell(*pools: tuple[int, bool], together: Together) -> CellRun:
    traces = tuple(run_at(pool, both) for pool, both in pools)
    return CellRun(10, 0, traces, startable=Startable(10), together=(together,))


def test_loads_in_flight_together_only_from_a_later_pool_fail_and_over_reserve() -> None:
    # They fit together from 12; the run keeps b waiting until a runs at 12 and 13.
    run = cell(
        (10, False),
        (11, False),
        (12, False),
        (13, False),
        (14, True),
        (15, True),
        together=Together(("a", "b"), 12),
    )
    assert in_flight_together(run.traces[-1], ("a", "b"))
    assert not in_flight_together(run.traces[0], ("a", "b"))
    assert concurrency_delay(run.traces, Together(("a", "b"), 12)) == 2
    verdict = judge_run(run)
    assert (verdict.observed, verdict.kind) == ("fail", "expectation")
    assert verdict.failing_pools == (12, 13)
    assert verdict.detail == (
        "loads a and b never in flight together at pools 12-13 (expected from pool 12): a "
        "reservation kept one waiting"
    )
    assert verdict.severity == "over_reservation"
    assert verdict.concurrency_delay == 2


def test_in_flight_together_where_they_fit_passes() -> None:
    verdict = judge_run(
        cell((10, False), (11, False), (12, True), (13, True), together=Together(("a", "b"), 12))
    )
    assert verdict.observed == "pass"
    assert verdict.concurrency_delay == 0


def test_an_exact_expectation_also_fails_below_its_pool() -> None:
    # Let in together at 11, where they do not fit together: under-reservation.
    exact = Together(("a", "b"), 12, exact=True)
    verdict = judge_run(cell((10, False), (11, True), (12, True), together=exact))
    assert (verdict.observed, verdict.kind, verdict.failing_pools) == ("fail", "expectation", (11,))
    assert "in flight together at pools 11, below pool 12 where they fit together" in verdict.detail
    # The one-sided expectation says nothing below its pool.
    assert (
        judge_run(
            cell((10, False), (11, True), (12, True), together=Together(("a", "b"), 12))
        ).observed
        == "pass"
    )


def test_promoted_is_a_loaded_request_out_of_its_load_state() -> None:
    promoted = RequestState("a", WAITING, 15, True, 0)
    reported = RequestState("b", LOADING, 16, True, 0)
    state = SchedulerState((promoted, reported), 3)
    assert unmet_expectation(StateExpectation(promoted=["a"], loaded=["a", "b"]), state, 2) is None
    assert unmet_expectation(StateExpectation(promoted=["b"]), state, 2) == (
        "after step 2: b is loaded, expected promoted"
    )
    # A request still to arrive (arrive_after) is named so, never a KeyError.
    assert unmet_expectation(StateExpectation(waiting=["late"]), state, 2) == (
        "after step 2: late has not arrived yet, expected waiting"
    )


CONCURRENT = """\
name: concurrent
groups:
  - {kind: full, block_size: 4}
speculative: {method: eagle, num_tokens: 3}
pool: {below: 0, above: 8}
requests:
  - {id: head, prompt: 16, max_tokens: 4}
  - {id: tail, prompt: 16, max_tokens: 4}
  - {id: local, prompt: 8, async_load: false}
concurrency:
  - {loads: [head, tail]}
engine: {watermark: 0.01, scheduler_reserve_full_isl: true}
variants: [stock, all_groups]
"""


@pytest.mark.parametrize(
    ("change", "line", "words"),
    [
        (("loads: [head, tail]", "loads: [head, nobody]"), 11, "unknown requests: nobody"),
        (("loads: [head, tail]", "loads: [head, local]"), 11, "not async loads: local"),
        (("loads: [head, tail]", "loads: [head]"), 11, "at least 2 items"),
        (("loads: [head, tail]", "loads: [head, tail], exact: true"), 11, "exact needs from_pool"),
        (("loads: [head, tail]", "loads: [head, tail], from_pool: {fixd: 3}"), 11, "fixd"),
        (("watermark: 0.01", "watermark: 1.0"), 12, "watermark"),
        (("scheduler_reserve_full_isl: true", "scheduler_reserve_full_isl: 1"), 12, "boolean"),
    ],
)
def test_bad_decision_input_is_one_line(
    write_case: WriteCase, change: tuple[str, str], line: int, words: str
) -> None:
    assert_one_line_error(write_case(replaced(CONCURRENT, change)), line, words)


@needs_vllm
def test_concurrency_from_where_the_loads_fit_together(adapter: Any, write_case: WriteCase) -> None:
    # Each load's fit is 7 (6 blocks and the null one): together they fit in 13, where stock
    # admits both at once; all_groups, which reserves per group and per load, does too here.
    from matrix.run.cell import run_cell

    text = replaced(CONCURRENT, ("  - {id: local, prompt: 8, async_load: false}\n", ""))
    cells = {c.variant: c for c in cells_from_file(write_case(text))}
    run = run_cell(adapter, cells["stock"])
    assert run.together == (Together(("head", "tail"), 13),)
    result = result_of(cells["stock"], judge_run(run))
    assert result.as_expected and result.over_reservation == 0


@needs_vllm
def test_engine_settings_reach_the_scheduler(adapter: Any, write_case: WriteCase) -> None:
    case = adapter.resolve(cells_from_file(write_case(CONCURRENT))[0].case.definition)
    scheduler = adapter.build(case, 40).scheduler
    assert scheduler.scheduler_config.watermark == 0.01
    assert scheduler.kv_cache_manager.watermark_blocks == 0  # int(0.01 * 40)
    assert scheduler.scheduler_reserve_full_isl is True


@needs_vllm
def test_the_model_runner_is_chosen_where_the_release_has_two(
    adapter: Any, write_case: WriteCase
) -> None:
    from vllm.config import VllmConfig

    path = write_case(replaced(CONCURRENT, ("watermark: 0.01", "model_runner: v1")))
    case = cells_from_file(path)[0].case.definition
    if not hasattr(VllmConfig, "use_v2_model_runner"):
        assert "has one model runner" in (adapter.unsupported(case) or "")
        v2 = cells_from_file(
            write_case(replaced(CONCURRENT, ("watermark: 0.01", "model_runner: v2")))
        )
        assert adapter.unsupported(v2[0].case.definition) is None
        return
    assert adapter.unsupported(case) is None
    handle = adapter.build(adapter.resolve(case), 40)
    assert handle.scheduler.use_v2_model_runner is False
    assert handle.worker.protocol.resumed_as_new is False


def test_stock_deciding_otherwise_than_its_twin_fails() -> None:
    # Stock admits b at step 1 at pool 12; its twin (the rule the release ships) at step 2.
    run = cell((11, False), (12, True), together=Together(("a", "b"), 99))
    twin = cell((11, False), (12, False), together=Together(("a", "b"), 99))
    judged = judge_run(
        CellRun(10, 0, run.traces, startable=Startable(10), twin="fixed", twin_traces=twin.traces)
    )
    assert (judged.observed, judged.kind, judged.failing_pools) == ("fail", "decision", (12,))
    assert judged.detail == (
        "decided otherwise than its twin at pools 12; pool 12: b WAITING never, after step 1 "
        "under fixed (the rule this release ships, patched in)"
    )
    assert judged.severity == "decision"
    alike = CellRun(
        10, 0, run.traces, startable=Startable(10), twin="fixed", twin_traces=run.traces
    )
    assert judge_run(alike).observed == "pass"


@needs_vllm
def test_a_reservation_mutant_decides_otherwise(adapter: Any, write_case: WriteCase) -> None:
    """vLLM's in-flight reservation forgetting what a load still needs: every run finishes
    (the admitting request's own margin covers the head), but stock admits the tail where
    the rule its release ships does not."""
    from matrix.run.cell import run_cell

    class Forgetful:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def build(self, case: Any, pool: int) -> Any:
            handle = self.inner.build(case, pool)
            handle.scheduler._request_remaining_blocks = lambda request: 0
            return handle

    text = replaced(CONCURRENT, ("  - {id: local, prompt: 8, async_load: false}\n", ""))
    stock = next(c for c in cells_from_file(write_case(text)) if c.variant == "stock")
    assert judge_run(run_cell(adapter, stock)).observed == "pass"
    verdict = judge_run(run_cell(Forgetful(adapter), stock))
    assert "decided otherwise than its twin" in verdict.detail, verdict.detail


def test_every_suite_is_named_in_its_reports() -> None:
    from matrix.case.shipped import SUITES
    from matrix.report.info import SUITE_WORDS

    assert set(SUITE_WORDS) == set(SUITES)
    assert SUITE_WORDS["adequacy"] == ("the adequacy cases", "python -m matrix adequacy")


def test_scheduled_tokens_are_a_step_expectation(write_case: WriteCase) -> None:
    from types import SimpleNamespace

    from matrix.run.play_events import unmet_scheduling

    state = SchedulerState((), 3)
    played: Any = SimpleNamespace(records=[StepRecord(4, (("a", 8), ("b", 6)), state, 3)])
    assert unmet_scheduling({"a": 8, "b": 6, "c": 0}, played, 4) is None
    assert unmet_scheduling({"b": 8}, played, 4) == "at step 4: b scheduled 6 tokens, expected 8"
    text = replaced(CONCURRENT, ("variants: [stock, all_groups]", "events: [{scheduled: {zz: 1}}]"))
    with pytest.raises(CaseFileError) as caught:
        cells_from_file(write_case(text))
    assert "unknown requests: zz" in str(caught.value)
