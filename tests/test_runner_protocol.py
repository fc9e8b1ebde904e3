"""The runner protocol every cell checks (adapters/runner_protocol.py): a scheduler that breaks
what vLLM's model runner needs fails its cells as ``protocol``, even where every request still
finishes and every block comes back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from matrix.case.loading import load_case_file
from matrix.judge.runs import classify_run
from matrix.run.pools import play_pool, run_pool
from matrix.run.variants import VARIANTS
from tests.helpers import WriteCase, needs_vllm, replaced

pytestmark = needs_vllm

# Two loads of 17 tokens in blocks of 4, EAGLE with 3 drafts (3 lookahead tokens): a step's
# slots cross a block boundary that the lookahead tokens alone reach.
TWO_LOADS = """\
name: two_loads
groups:
  - {kind: full, block_size: 4}
speculative: {method: eagle, num_tokens: 3}
pool: 40
requests:
  - {id: head, prompt: 17, max_tokens: 6}
  - {id: tail, prompt: 17, max_tokens: 6}
"""


def run_patched(adapter: Any, path: Path, patch: Callable[[Any], None]) -> Any:
    """The case's run at its pool under stock, ``patch`` applied to the scheduler instance
    the handle drives (a mutant of vLLM's code, on this instance only)."""
    case = adapter.resolve(load_case_file(path)[1])

    def build() -> Any:
        handle = adapter.build(case, case.pool)
        patch(handle.scheduler)
        return handle

    return play_pool(case.pool, case, VARIANTS["stock"], build)


def test_stock_keeps_the_protocol(adapter: Any, write_case: WriteCase) -> None:
    trace = run_pool(adapter, load_case_file(write_case(TWO_LOADS))[1], "stock", 40)
    assert trace.stopped == "finished" and trace.protocol == ""


def test_no_lookahead_slots_is_a_violation(adapter: Any, write_case: WriteCase) -> None:
    # The scheduler forgets the drafter's lookahead when it allocates: every request still
    # finishes and the accounting balances, but the drafter's tokens have no slots.
    def no_lookahead(scheduler: Any) -> None:
        scheduler.num_lookahead_tokens = 0

    trace = run_patched(adapter, write_case(TWO_LOADS), no_lookahead)
    outcome = classify_run(trace)
    assert outcome.kind == "protocol", outcome
    assert "(+3 lookahead)" in outcome.diagnosis and "slots for" in outcome.diagnosis


def test_a_load_holding_more_than_its_tokens_is_a_violation(
    adapter: Any, write_case: WriteCase
) -> None:
    # An async load allocated with its lookahead slots: it holds a block its transfer does
    # not fill (vLLM limits the lookahead of a load for this reason).
    def load_with_lookahead(scheduler: Any) -> None:
        manager = scheduler.kv_cache_manager
        allocate = manager.allocate_slots

        def allocate_slots(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("delay_cache_blocks"):
                kwargs["num_lookahead_tokens"] = 4
            return allocate(*args, **kwargs)

        manager.allocate_slots = allocate_slots

    outcome = classify_run(run_patched(adapter, write_case(TWO_LOADS), load_with_lookahead))
    assert outcome.kind == "protocol", outcome
    assert "head's async load of 17 tokens (17 computed) holds 6 blocks" in outcome.diagnosis
    assert "in full-attention group 0: the load fills 5" in outcome.diagnosis


def test_a_load_scheduled_before_its_report_is_a_violation(
    adapter: Any, write_case: WriteCase
) -> None:
    from vllm.v1.request import RequestStatus

    # Promotion without waiting for the worker's report.
    def early_promotion(scheduler: Any) -> None:
        handle = scheduler._handle_blocked_waiting_request

        def promote(request: Any) -> bool:
            if request.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
                scheduler.finished_recving_kv_req_ids.add(request.request_id)
            return bool(handle(request))

        scheduler._handle_blocked_waiting_request = promote

    outcome = classify_run(run_patched(adapter, write_case(TWO_LOADS), early_promotion))
    assert outcome.kind == "protocol", outcome
    assert "scheduled before the worker reported its load" in outcome.diagnosis


# A hit loaded within the step (OffloadingConnector's sync_load_budget_bytes, vLLM 0.33 on): s's
# 8 tokens (2,048 bytes here) fit the budget, g's 32 do not and load asynchronously.
SYNC_LOAD = """\
name: sync_load
groups:
  - {kind: full, block_size: 4}
connector: offloading
connector_options: {block_size: 4, sync_load_budget_bytes: 4096}
pool: 40
requests:
  - {id: s, prompt: 12, stored: {tokens: 8}, max_tokens: 3}
  - {id: g, prompt: 40, stored: {tokens: 32}, max_tokens: 3}
"""


def flag_sync_loads(value: bool) -> Callable[[Any], None]:
    """A patch: the scheduler's every output says ``has_sync_kv_loads = value``."""

    def patch(scheduler: Any) -> None:
        schedule = scheduler.schedule

        def schedule_flagged(*args: Any, **kwargs: Any) -> Any:
            output = schedule(*args, **kwargs)
            output.has_sync_kv_loads = value
            return output

        scheduler.schedule = schedule_flagged

    return patch


def needs_sync_loads() -> None:
    from matrix.adapters.requirements import missing_connector_options

    if missing_connector_options("offloading", ["sync_load_budget_bytes"]):
        pytest.skip("OffloadingConnector's sync_load_budget_bytes came with vLLM 0.33")


def test_stock_flags_its_sync_loads(adapter: Any, write_case: WriteCase) -> None:
    needs_sync_loads()
    trace = run_pool(adapter, load_case_file(write_case(SYNC_LOAD))[1], "stock", 40)
    assert trace.stopped == "finished" and trace.protocol == ""
    assert ("s", 4) in trace.steps[0].scheduled  # loaded within the step, scheduled at once


def test_a_sync_load_unflagged_is_a_violation(adapter: Any, write_case: WriteCase) -> None:
    # The worker would start s's load after the forward that reads its KV.
    needs_sync_loads()
    outcome = classify_run(run_patched(adapter, write_case(SYNC_LOAD), flag_sync_loads(False)))
    assert outcome.kind == "protocol", outcome
    assert "s scheduled with a synchronous KV load, but has_sync_kv_loads is false" in (
        outcome.diagnosis
    )


def test_a_sync_flag_without_a_sync_load_is_a_violation(
    adapter: Any, write_case: WriteCase
) -> None:
    # Only async loads: the flag would put their submission before the forward.
    outcome = classify_run(run_patched(adapter, write_case(TWO_LOADS), flag_sync_loads(True)))
    assert outcome.kind == "protocol", outcome
    assert "has_sync_kv_loads is true, but no request scheduled loads synchronously" in (
        outcome.diagnosis
    )


def batch(new: tuple[str, ...] = (), cached: tuple[str, ...] = (), resumed: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    """A scheduler output as the runner reads it: new and cached requests, one token each."""
    return SimpleNamespace(
        num_scheduled_tokens={r: 1 for r in (*new, *cached)},
        scheduled_new_reqs=[SimpleNamespace(req_id=r, num_computed_tokens=0) for r in new],
        scheduled_cached_reqs=SimpleNamespace(
            req_ids=list(cached),
            num_computed_tokens=[0] * len(cached),
            resumed_req_ids=set(resumed),
        ),
        finished_req_ids=set(),
    )


@pytest.mark.parametrize("resumed_as_new", [False, True])
def test_new_cached_and_resumed(adapter: Any, write_case: WriteCase, resumed_as_new: bool) -> None:
    """What a runner holds decides how a request must come: the rules of both runners, on a
    real scheduler's groups with hand-made batches."""
    case = load_case_file(
        write_case(replaced(TWO_LOADS, ("speculative: {method: eagle, num_tokens: 3}\n", "")))
    )[1]
    handle = adapter.build(case, 40)
    for request in case.requests:
        handle.add_request(request)
    scheduler = handle.scheduler
    protocol = type(handle.worker.protocol)(scheduler, resumed_as_new)
    for request in scheduler.requests.values():  # a slot for every token sent below
        scheduler.kv_cache_manager.allocate_slots(request, 4)
    assert protocol.check(batch(cached=("head",))) == (
        "head sent as cached, but the runner never held it (a first schedule is new)"
    )
    protocol = type(handle.worker.protocol)(scheduler, resumed_as_new)
    assert protocol.check(batch(new=("head", "tail"))) == ""
    assert protocol.check(batch(cached=("head",), resumed=("head",))).startswith(
        "head sent as resumed, but it was not preempted"
    )
    assert protocol.check(batch(new=("tail",))).startswith("tail sent as new, but the runner holds")
    scheduler.requests["head"].num_preemptions += 1
    came_back = (
        batch(new=("head",)) if resumed_as_new else batch(cached=("head",), resumed=("head",))
    )
    went_wrong = (
        batch(cached=("head",), resumed=("head",)) if resumed_as_new else batch(new=("head",))
    )
    assert protocol.check(came_back) == ""
    scheduler.requests["head"].num_preemptions += 1
    assert protocol.check(went_wrong).startswith("head sent as")


PREFIX_KEPT = """\
name: prefix_kept
groups:
  - {kind: full, block_size: 4}
connector: mooncake_store
engine: {kv_load_failure_policy: recompute}
pool: 20
requests:
  - {id: broken, prompt: 16, max_tokens: 4}
events:
  - step: 1
  - fail_load: [broken]
    valid_blocks: 2
  - run: {}
"""


def test_a_kept_prefix_freed_is_a_violation(adapter: Any, write_case: WriteCase) -> None:
    """A failed load's valid prefix freed instead of cached, its computed tokens kept: the
    request is prefilled from token 8 into fresh blocks, its first 8 tokens' KV lost."""
    path = write_case(PREFIX_KEPT)
    missing = adapter.unsupported(load_case_file(path)[1])
    if missing:
        pytest.skip(missing)
    kept = run_patched(adapter, path, lambda scheduler: None)
    assert kept.stopped == "finished" and kept.protocol == ""
    prefills = [dict(r.scheduled).get("broken") for r in kept.steps if r.scheduled]
    assert prefills[0] == 8  # the valid prefix (2 blocks) kept: 8 of 16 tokens prefilled

    def free_the_prefix(scheduler: Any) -> None:
        update = scheduler._update_waiting_for_remote_kv

        def freeing(request: Any) -> None:
            request_id = request.request_id
            if request_id in scheduler.failed_recving_kv_req_ids and request.num_computed_tokens:
                scheduler.kv_cache_manager.free(request)
                scheduler.failed_recving_kv_req_ids.remove(request_id)
                scheduler.finished_recving_kv_req_ids.remove(request_id)
                return
            update(request)

        scheduler._update_waiting_for_remote_kv = freeing

    outcome = classify_run(run_patched(adapter, path, free_the_prefix))
    assert outcome.kind == "protocol", outcome
    assert "broken sent with 8 tokens computed, but its block" in outcome.diagnosis
    assert "holds no KV" in outcome.diagnosis
