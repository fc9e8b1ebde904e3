"""The verdict works on snapshots alone: no vLLM needed to test it."""

from __future__ import annotations

from matrix.adapters.protocol import RequestState, SchedulerState
from matrix.judge.runs import RunOutcome, classify_run
from matrix.judge.verdict import acceptable, expectation_met, judge_cell
from matrix.run.records import RunTrace, StepRecord


def request(
    rid: str, status: str, computed: int = 0, done: bool = False, preemptions: int = 0
) -> RequestState:
    return RequestState(rid, status, computed, done, preemptions)


def trace(*states: tuple[RequestState, ...], stopped: str = "stuck", pool: int = 10) -> RunTrace:
    records = tuple(
        StepRecord(i + 1, (), SchedulerState(requests, free_blocks=1), 1)
        for i, requests in enumerate(states)
    )
    return RunTrace(pool, records, stopped, reserved=2)  # type: ignore[arg-type]


def test_completed_load_never_scheduled_is_a_stall() -> None:
    loading = (request("a", "WAITING_FOR_REMOTE_KVS", 16),)
    stuck = (request("a", "WAITING", 15, done=True),)
    outcome = classify_run(trace(loading, stuck, stuck, stuck))
    assert outcome.kind == "stall"
    assert "a (status WAITING, 15 tokens computed)" in outcome.diagnosis
    assert "load completed at step 2" in outcome.diagnosis
    assert "1 free" in outcome.diagnosis and "reservation in force 2 blocks" in outcome.diagnosis


def test_not_a_stall_while_something_runs() -> None:
    state = (request("a", "WAITING", 15, done=True), request("b", "RUNNING", 3))
    assert classify_run(trace(state, state, state)).kind != "stall"


def test_preempted_and_never_resumed_is_not_a_stall() -> None:
    state = (request("a", "PREEMPTED", 0, done=True, preemptions=1),)
    outcome = classify_run(trace(state, state, state))
    assert outcome.kind == "preempted"
    assert "preempted 1x" in outcome.diagnosis


def test_never_admitted() -> None:
    state = (request("a", "FINISHED"), request("b", "WAITING"))
    assert classify_run(trace(state, state, state)).kind == "not_admitted"


def test_finished_error_and_bound() -> None:
    done = (request("a", "FINISHED"),)
    assert classify_run(trace(done, stopped="finished")).kind == "finished"
    error = classify_run(RunTrace(9, (), "error", "ValueError: boom"))
    assert error.diagnosis == "ValueError: boom; pool 9 blocks"
    busy = (request("a", "RUNNING", 5),)
    assert classify_run(trace(busy, stopped="step_bound")).kind == "step_bound"
    # Stuck with a loaded request while another one runs: none of the known shapes.
    odd = (request("a", "WAITING", 15, done=True), request("b", "RUNNING", 3))
    assert classify_run(trace(odd, odd, odd)).kind == "stuck"


def test_acceptance_against_the_fit() -> None:
    fit = 10
    assert acceptable(RunOutcome(4, "not_admitted", ""), fit)
    assert acceptable(RunOutcome(9, "preempted", ""), fit)
    assert not acceptable(RunOutcome(10, "not_admitted", ""), fit)  # over-reservation
    assert not acceptable(RunOutcome(4, "stall", ""), fit)  # a stall is wrong at any size
    assert not acceptable(RunOutcome(4, "error", ""), fit)
    assert acceptable(RunOutcome(9, "expectation", ""), fit)  # too small for the scenario
    assert not acceptable(RunOutcome(10, "expectation", ""), fit)


def test_cell_names_failing_pools_and_first_diagnosis() -> None:
    outcomes = [RunOutcome(p, "not_admitted", "") for p in range(4, 9)]
    outcomes += [RunOutcome(9, "stall", "a stuck"), RunOutcome(10, "stall", "a stuck")]
    outcomes += [RunOutcome(p, "finished", "") for p in range(11, 15)]
    verdict = judge_cell(outcomes, fit=11)
    assert (verdict.observed, verdict.kind) == ("fail", "stall")
    assert verdict.detail.startswith("stall at pools 9-10 (fit 11); pool 9: a stuck")
    passing = judge_cell([o for o in outcomes if o.kind != "stall"], fit=11)
    assert passing.observed == "pass" and "finished at pools 11-14" in passing.detail


def test_expectation_may_pin_a_failure_kind() -> None:
    verdict = judge_cell([RunOutcome(9, "stall", "")], fit=10)
    assert expectation_met("fail", verdict)
    assert expectation_met("stall", verdict)
    assert not expectation_met("not_admitted", verdict)
    assert not expectation_met("pass", verdict)


def test_a_stall_outranks_another_request_preempted() -> None:
    state = (
        request("a", "PREEMPTED", 0, done=True, preemptions=1),
        request("b", "WAITING", 15, done=True),
    )
    outcome = classify_run(trace(state, state, state))
    assert outcome.kind == "stall"
    assert outcome.diagnosis.startswith("b (status WAITING")


def test_every_variant_name_has_a_variant() -> None:
    from matrix.run.variants import VARIANTS
    from matrix.variant_names import VARIANT_NAMES

    assert tuple(VARIANTS) == VARIANT_NAMES
    assert all(VARIANTS[name].name == name for name in VARIANT_NAMES)


def test_slack_tolerates_refusal_just_above_the_fit() -> None:
    refused = RunOutcome(10, "not_admitted", "")
    assert not acceptable(refused, fit=10)
    assert acceptable(refused, fit=10, slack=1)
    assert not acceptable(RunOutcome(11, "not_admitted", ""), fit=10, slack=1)
    assert not acceptable(RunOutcome(10, "preempted", ""), fit=10, slack=1)  # only refusal


def test_a_range_below_the_fit_says_so() -> None:
    verdict = judge_cell([RunOutcome(p, "not_admitted", "") for p in (4, 5)], fit=9)
    assert verdict.observed == "pass"
    assert verdict.detail.endswith(
        "no pool reaches the fit, so only stalls and errors were checked"
    )


def test_failing_pools_are_those_not_acceptable() -> None:
    outcomes = [
        RunOutcome(9, "not_admitted", ""),
        RunOutcome(10, "not_admitted", ""),
        RunOutcome(11, "stall", ""),
        RunOutcome(12, "finished", ""),
    ]
    assert judge_cell(outcomes, fit=9, slack=1).failing_pools == (10, 11)
    assert judge_cell(outcomes, fit=9).failing_pools == (9, 10, 11)
    assert judge_cell(outcomes[-1:], fit=9).failing_pools == ()


def test_a_leak_outranks_how_the_run_ended_and_always_fails() -> None:
    done = (request("a", "FINISHED"),)
    leaked = RunTrace(
        12, trace(done, stopped="finished").steps, "finished", leak="after step 1: 10 of 12"
    )
    outcome = classify_run(leaked)
    assert outcome.kind == "leak"
    assert outcome.diagnosis.startswith("after step 1: 10 of 12; pool 12 blocks")
    assert not acceptable(outcome, fit=4) and not acceptable(outcome, fit=40)
