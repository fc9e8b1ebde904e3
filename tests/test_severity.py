"""How bad a failing pool is, from runs alone (no vLLM): each severity's rule, the cell's worst,
and the words the Models table and the case table use."""

from __future__ import annotations

from dataclasses import replace

import pytest

from matrix.judge.result import CellResult
from matrix.judge.runs import RunKind, RunOutcome
from matrix.judge.severity import PoolFailure, pool_failures, severity_of, worst
from matrix.outcomes import Severity
from matrix.report.models import model_words, models_table
from matrix.report.tables import cell_text

FIT = 13


@pytest.mark.parametrize(
    ("pool", "kind", "startable", "severity"),
    [
        # From the fit and startable up, nothing can ever run again: a deployment hits it.
        (17, "stall", 10, "deadlock"),
        (17, "stuck", None, "deadlock"),  # startable unknown: the fit alone decides
        (13, "preempted", 10, "deadlock"),
        # vLLM starts with 11 blocks, the request needs 13.
        (11, "not_admitted", 11, "sizer"),
        (12, "stall", 12, "sizer"),  # worse than unpromotable: vLLM would start there
        # Below the fit, not a pool vLLM starts with: the admission contract, not a hang.
        (11, "stall", 12, "unpromotable"),
        (11, "stall", None, "unpromotable"),
        # Refused although it fits: over-reservation, whatever startable says.
        (13, "not_admitted", 20, "over_reservation"),
        (15, "not_admitted", None, "over_reservation"),
        # A pool no engine serving these requests has.
        (8, "not_admitted", 12, "undersized"),
        (16, "stall", 20, "undersized"),  # above the fit, but below what vLLM starts with
        # Kinds that are their own severity, wherever they happen.
        (5, "leak", 12, "leak"),
        (20, "error", None, "error"),
        (20, "expectation", None, "expectation"),
    ],
)
def test_each_severity_s_rule(
    pool: int, kind: RunKind, startable: int | None, severity: Severity
) -> None:
    assert severity_of(RunOutcome(pool, kind, ""), FIT, startable) == severity


def test_a_pool_the_served_engine_fits_is_no_sizer_failure() -> None:
    # vLLM starts with 10 blocks for an engine sized to the request, whose scheduler caps the
    # request's slots there: it needs 11, the case's runs (a longer max_model_len) 13.
    assert severity_of(RunOutcome(10, "stall", ""), FIT, 10, served_fit=11) == "sizer"
    assert severity_of(RunOutcome(11, "stall", ""), FIT, 10, served_fit=11) == "unpromotable"
    assert severity_of(RunOutcome(12, "not_admitted", ""), FIT, 10, 11) == "undersized"


def test_undersized_from_startable_up_is_a_failure_only_the_case_s_engine_has() -> None:
    # single_group[k=7] on 0.33: vLLM starts the engine sized for the request with 8 blocks,
    # where the request fits (served fit 8); the case's engine (max_model_len 1024) needs 9.
    refused = RunOutcome(8, "not_admitted", "")
    assert severity_of(refused, 9, 8, served_fit=8) == "undersized"
    # Without the served engine's fit, the same pool is one vLLM starts with and the request
    # cannot run in: the sizer's failure.
    assert severity_of(refused, 9, 8) == "sizer"
    # Below startable: no engine serving the request has the pool at all.
    assert severity_of(RunOutcome(7, "not_admitted", ""), 9, 8, served_fit=8) == "undersized"
    # From the served engine's fit up, a stall below the case's fit is still unpromotable.
    assert severity_of(RunOutcome(8, "stall", ""), 9, 8, served_fit=8) == "unpromotable"


def test_a_deadlock_must_fail_on_the_served_engine_too() -> None:
    stalled = RunOutcome(17, "stall", "")
    assert severity_of(stalled, FIT, 12, served="stall") == "deadlock"
    assert severity_of(stalled, FIT, 12, served=None) == "deadlock"  # not run again
    # It finished on the engine sized for the requests: only the case's longer
    # max_model_len hangs there, and no engine with 17 blocks runs that.
    assert severity_of(stalled, FIT, 12, served="finished") == "undersized"


def test_finished_pools_are_not_failures_and_the_worst_ignores_undersized() -> None:
    outcomes = [
        RunOutcome(8, "not_admitted", ""),
        RunOutcome(11, "stall", ""),
        RunOutcome(13, "finished", ""),
        RunOutcome(14, "not_admitted", ""),
    ]
    failures = pool_failures(outcomes, FIT, 10)
    assert [f.pool for f in failures] == [8, 11, 14]
    assert [f.severity for f in failures] == ["undersized", "sizer", "over_reservation"]
    assert worst(failures) == "sizer"
    assert worst(failures[:1]) is None  # only a pool no engine has: nothing to report


def result(
    variant: str,
    failures: tuple[PoolFailure, ...] = (),
    observed: str = "pass",
    kind: str = "finished",
    expected: str = "pass",
    **more: object,
) -> CellResult:
    cell = CellResult(
        "case", None, variant, expected, None, observed, kind, "", "x.yaml:1", True, fit=19
    )
    severity = worst(failures)
    as_expected = observed == expected
    return replace(
        cell,
        failures=failures,
        severity=severity,
        as_expected=as_expected,
        model="m",
        **more,  # type: ignore[arg-type]
    )


def test_a_failure_the_case_expects_never_reads_as_fail() -> None:
    stall = (PoolFailure(11, "stall", "unpromotable"),)
    expected = result("original", stall, "fail", "stall", "fail")
    assert cell_text(expected) == "stall: unpromotable"
    surprise = result("fixed", stall, "fail", "stall", "pass")
    assert cell_text(surprise) == "FAIL stall: unpromotable (expected pass)"
    refused = (PoolFailure(19, "not_admitted", "over_reservation"),)
    assert cell_text(result("fixed", refused)) == "pass, over_reservation"


def test_the_models_table_says_what_a_deployment_meets() -> None:
    cells = [
        result("fixed"),
        result("fixed", (PoolFailure(8, "not_admitted", "undersized"),)),
        result(
            "fixed",
            (PoolFailure(19, "not_admitted", "over_reservation"),),
            over_reservation=1,
        ),
        result(
            "fixed",
            (PoolFailure(20, "not_admitted", "over_reservation"),),
            over_reservation=7,
        ),
        result("original", (PoolFailure(15, "stall", "unpromotable"),), "fail", "stall"),
        result("original", (PoolFailure(16, "stall", "unpromotable"),), "fail", "stall"),
        result("none", (PoolFailure(40, "stall", "deadlock"),), "fail", "stall"),
        result("none", (PoolFailure(41, "stall", "deadlock"),), "fail", "stall"),
        result("stock", (PoolFailure(18, "not_admitted", "sizer"),), startable=18),
    ]
    assert model_words([c for c in cells if c.variant == "fixed"][:2]) == "ok"
    header, rows = models_table(cells)
    assert header == ["Model", "stock", "none", "original", "fixed"]
    assert rows == [
        [
            "m",
            "sizer: starts at 18, needs 19",
            "DEADLOCK at pools 40-41 (2 cells)",
            "unpromotable below the fit at pools 15-16 (2 cells)",
            "over-reserves 1-7 blocks (2 cells)",
        ]
    ]
    assert model_words([]) == "-"
