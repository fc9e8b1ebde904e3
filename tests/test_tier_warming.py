"""A tier connector's cells are judged on what the case says the tier holds: a pool where the
request that warms the tier cannot run, and the tier's lookup finds less than in an ample pool,
is not run, never blamed on the reservation (issue 45 item 2)."""

from __future__ import annotations

from typing import Any

from matrix.case.expansion import cells_from_file
from matrix.installed import installed_release
from matrix.judge.result import result_of
from matrix.judge.runs import RunOutcome
from matrix.judge.severity import pool_failures
from matrix.judge.tightness import over_reservation
from matrix.judge.verdict import Verdict, judge_cell
from matrix.run.pools import run_pool
from tests.helpers import REPO, WriteCase, needs_vllm, replaced, verdict_of

# The tier holds the whole prompt (it loads: async_load), EAGLE's lookahead of 2.
EAGLE_SWA = """\
name: eagle_swa
groups:
  - {kind: full, block_size: 16}
  - {kind: sliding_window, block_size: 16, window: 32}
speculative: {method: eagle, num_tokens: 2}
connector: simple_cpu_offload
pool: {start: 10, stop: 13}
requests:
  - {id: a, prompt: 80}
variants: [stock, none]
"""


@needs_vllm
def test_a_pool_whose_warming_request_cannot_run_is_not_blamed_on_the_reservation(
    adapter: Any, write_case: WriteCase
) -> None:
    """80 tokens and EAGLE's 2 lookahead slots do not fit 11 or 12 blocks, so the request that
    stores them never ran, the tier stayed empty, and every variant, ``none`` too, was
    ``over_reservation`` there (the fit, 11, is the case's request loading 64 tokens)."""
    for cell in cells_from_file(write_case(EAGLE_SWA)):
        verdict = verdict_of(adapter, cell)
        kinds = {o.pool: o.kind for o in verdict.outcomes}
        assert kinds == {
            10: "tier_unfilled",
            11: "tier_unfilled",
            12: "tier_unfilled",
            13: "finished",
        }
        # 0.30 and 0.31 load 48 tokens there (their EAGLE hit drops a block), then compute 32.
        fit, hit = (12, 48) if installed_release() in ("0.30", "0.31") else (11, 64)
        assert verdict.observed == "pass" and verdict.fit == fit and verdict.severity is None
        assert "not run at 10-12, the tier not filled" in verdict.detail
        unfilled = next(o.diagnosis for o in verdict.outcomes if o.pool == 11)
        assert unfilled == (
            "tier not filled: the request that puts a's first 80 tokens in the tier cannot run "
            f"to its end in 11 blocks: a's lookup finds 0 of its {hit} tokens"
        )
        assert result_of(cell, verdict).over_reservation == 0


@needs_vllm
def test_a_cut_warming_that_stored_what_the_lookup_reaches_fills_the_tier(
    adapter: Any,
) -> None:
    """Jamba under Offloading with EAGLE, a prompt one token past two 80-token blocks: at pool
    18 the request that stores it does not run to its end, yet stored all the lookup ever
    reaches (160 tokens on 0.34; 80 before, whose EAGLE hit drops a block), so the pool runs
    and stalls as finding 6 says.
    (Falcon-H1 did so at pool 6 before 0.32; from 0.32 MambaMixer2's prefill checkpoint
    blocks keep its storing request out of pools that small, while Jamba's MambaMixer has
    none.)"""
    (cell,) = [
        c
        for c in cells_from_file(REPO / "connector_cases" / "model_jamba-mini.yaml")
        if c.case.case_id == "jamba-mini_connectors[connector=offloading,spec=eagle1,prompt=past]"
        and c.variant == "none"
    ]
    from matrix.adapters.connectors.tier import lookups

    case = adapter.resolve(cell.case.definition)
    handle = adapter.build(case, 18)
    assert handle.warming_cut and not handle.tier_unfilled
    reached = lookups(handle, case)
    assert reached == lookups(adapter.build(case, 60), case) and reached["a"][0] > 0
    assert run_pool(adapter, case, "none", 18).stopped == "stuck"


@needs_vllm
def test_a_pool_whose_tier_cannot_be_filled_is_not_run(adapter: Any, write_case: WriteCase) -> None:
    """A long prompt under a sliding window: computed in one step it holds every block of the
    window group, where the case's load holds the window's. Its pools around the fit cannot
    fill the tier: they are not run, and a cell with no pool run is unsupported, never an
    ``over_reservation`` of a variant that reserves nothing."""
    text = replaced(
        EAGLE_SWA,
        ("prompt: 80", "prompt: 256"),
        ("pool: {start: 10, stop: 13}", "pool: {below: 1, above: 1}"),
        ("[stock, none]", "[none, stock]"),
    )
    (cell, _) = cells_from_file(write_case(text))
    verdict = verdict_of(adapter, cell)
    assert {o.kind for o in verdict.outcomes} == {"tier_unfilled"}
    assert verdict.observed == "pass" and verdict.severity is None
    record = result_of(cell, verdict)
    assert record.observed == "skip"
    assert "at every pool swept, tier not filled: the request that puts a's first 256" in (
        record.detail
    )


def test_an_unfilled_pool_is_neither_a_failure_nor_over_reservation() -> None:
    outcomes = [
        RunOutcome(9, "not_admitted", "never admitted"),
        RunOutcome(10, "tier_unfilled", "tier not filled: why"),
        RunOutcome(11, "finished", "done"),
        RunOutcome(12, "finished", "done"),
    ]
    verdict: Verdict = judge_cell(outcomes, fit=10)
    assert verdict.observed == "pass" and verdict.failing_pools == ()
    assert "not run at 10, the tier not filled" in verdict.detail
    assert pool_failures(outcomes, 10, None) == (pool_failures(outcomes[:1], 10, None))
    # 10 did not run: the run of finishing pools may begin there, never below the fit.
    assert over_reservation(outcomes, 10) == 0
    assert over_reservation(outcomes, 9) == 1  # 9 ran and was refused
    assert over_reservation([outcomes[1], *outcomes[2:]], 8) == 2
