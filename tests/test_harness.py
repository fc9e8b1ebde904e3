"""The harness against vLLM's real scheduler: stall detection and variant isolation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matrix.adapters.protocol import LOADING
from matrix.case.expansion import cells_from_file
from matrix.case.loading import load_case_file
from matrix.installed import installed_vllm_version
from matrix.judge.runs import classify_run
from matrix.releases import shipped_variant
from matrix.run.pools import run_pool
from tests.helpers import WriteCase, needs_vllm, replaced, verdict_of

pytestmark = needs_vllm


# Two groups, eagle with k=3 (N = 7): the promotion step needs 2 new blocks per group.
# Pool 11 = the null block + 4 prompt blocks per group + 2: room for the prompt and one
# group's margin, so the `original` margin (2 blocks, counted once) admits a request
# whose promotion then cannot allocate.
STALLING = """\
name: stalling
groups:
  - {kind: full, block_size: 4}
  - {kind: full, block_size: 4}
speculative: {method: eagle, num_tokens: 3}
pool: 11
requests:
  - {id: a, prompt: 16, max_tokens: 4}
events:
  - step: 1
    expect: {loading: [a]}
  - complete_load: [a]
  - step: 1
  - run: {max_steps: 50}
"""


def case_of(path: Path) -> Any:
    return load_case_file(path)[1]


def test_stall_is_detected_within_the_bound(adapter: Any, write_case: WriteCase) -> None:
    case = case_of(write_case(STALLING))
    trace = run_pool(adapter, case, "original", 11)
    assert trace.stopped == "stuck"
    assert len(trace.steps) < 10  # found long before the 50-step bound
    outcome = classify_run(trace)
    assert outcome.kind == "stall"
    assert outcome.diagnosis.startswith("a (status WAITING, 15 tokens computed): load completed")
    assert "nothing running; pool 11 blocks" in outcome.diagnosis
    assert "reservation in force" in outcome.diagnosis


def test_the_fix_refuses_instead_of_stalling(adapter: Any, write_case: WriteCase) -> None:
    case = case_of(write_case(STALLING))
    outcome = classify_run(run_pool(adapter, case, "fixed", 11))
    # a is never admitted (so its "loading" expectation fails too, but not admitted says more)
    assert outcome.kind == "not_admitted"
    assert outcome.diagnosis.startswith("a (status WAITING, 0 tokens computed): never admitted")
    assert classify_run(run_pool(adapter, case, "fixed", 13)).kind == "finished"


def test_a_step_expectation_that_fails(adapter: Any, write_case: WriteCase) -> None:
    case = case_of(
        write_case(replaced(STALLING, ("expect: {loading: [a]}", "expect: {running: [a]}")))
    )
    outcome = classify_run(run_pool(adapter, case, "stock", 40))
    assert outcome.kind == "expectation"
    assert outcome.diagnosis.startswith("after step 1: a is loading, expected running; pool 40")
    # The scenario plays on after an unmet expectation, and a stall outranks it.
    assert classify_run(run_pool(adapter, case, "original", 11)).kind == "stall"


def _cells_by_variant(adapter: Any, path: Path) -> dict[str, tuple[str, str, str]]:
    return {
        c.variant: (lambda v: (v.observed, v.kind, v.detail))(verdict_of(adapter, c))
        for c in cells_from_file(path)
    }


def test_variants_never_leak_into_the_next_case(adapter: Any, write_case: WriteCase) -> None:
    from vllm.v1.core.sched.scheduler import Scheduler

    class_methods = dict(vars(Scheduler))
    path = write_case(replaced(STALLING, ("pool: 11", "pool: {start: 8, stop: 16}")))
    stock = next(c for c in cells_from_file(path) if c.variant == "stock")
    before = verdict_of(adapter, stock)
    patched = _cells_by_variant(adapter, path)
    after = verdict_of(adapter, stock)
    assert after == before
    assert patched["original"][0] == "fail" and patched["none"][0] == "fail"
    assert dict(vars(Scheduler)) == class_methods  # the class was never touched


def test_reservations_per_variant(adapter: Any, write_case: WriteCase) -> None:
    """With nothing in flight, the reservation an admission keeps free is the variant's margin."""
    from matrix.run.variants import VARIANTS

    text = replaced(
        STALLING,
        (
            "  - {kind: full, block_size: 4}\n  - {kind: full, block_size: 4}",
            "  - {kind: full, block_size: 4}\n  - {kind: full, block_size: 8}",
        ),
    )
    case = case_of(write_case(text))
    margins = {}
    for name, variant in VARIANTS.items():
        handle = adapter.build(case, 40)
        variant.apply(handle)
        margins[name] = handle.reservation()
    # N = 7; block sizes 4 and 8, scheduler block size 8.
    assert margins.pop("stock") == margins[shipped_variant(installed_vllm_version())]
    assert margins == {
        "none": 0,
        "original": 1,
        "group_count": 2,
        "all_groups": 3,
        "fixed": 3,
        "proposed": 0,  # its margin is counted per admitting request, not kept standing
    }


def test_the_shipped_variant_reserves_what_stock_does(adapter: Any, write_case: WriteCase) -> None:
    """With loads in flight (their remaining blocks counted through the adapter's coordinator
    call), the variant the installed release ships reserves exactly what its stock code does."""
    from matrix.run.variants import VARIANTS

    text = replaced(
        STALLING,
        (
            "  - {kind: full, block_size: 4}\n  - {kind: full, block_size: 4}",
            "  - {kind: full, block_size: 4}\n  - {kind: sliding_window, block_size: 8, window: 8}",
        ),
        (
            "  - {id: a, prompt: 16, max_tokens: 4}",
            "  - {id: a, prompt: 16, max_tokens: 4}\n  - {id: b, prompt: 21, max_tokens: 6}",
        ),
    )
    case = case_of(write_case(text))
    shipped = VARIANTS[shipped_variant(installed_vllm_version())]
    reserved = {}
    for variant in (VARIANTS["stock"], shipped):
        handle = adapter.build(case, 200)
        variant.apply(handle)
        for request in case.requests:
            handle.add_request(request)
        handle.step(set())
        assert [r.status for r in handle.state().requests] == [LOADING, LOADING]
        reserved[variant.name] = handle.reservation()
    assert reserved["stock"] == reserved[shipped.name]
    if shipped.name != "none":  # 0.30 reserves nothing here: the loads hold their prompts
        assert reserved["stock"] > 0


def test_stated_lookahead_is_checked_against_vllm(adapter: Any, write_case: WriteCase) -> None:
    right = write_case(
        replaced(STALLING, ("num_tokens: 3}", "num_tokens: 3, lookahead: 3}")), "a.yaml"
    )
    wrong = write_case(
        replaced(STALLING, ("num_tokens: 3}", "num_tokens: 3, lookahead: 0}")), "b.yaml"
    )
    fixed_right = next(c for c in cells_from_file(right) if c.variant == "fixed")
    fixed_wrong = next(c for c in cells_from_file(wrong) if c.variant == "fixed")
    assert verdict_of(adapter, fixed_right).kind != "error"
    verdict = verdict_of(adapter, fixed_wrong)
    assert (verdict.observed, verdict.kind) == ("fail", "error")
    assert "vLLM derives 3 for method eagle" in verdict.detail
