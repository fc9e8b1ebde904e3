"""The harness's per-step records, made cheaply (no vLLM): ``fast_init`` keeps a frozen
dataclass's signature, defaults and immutability, and the state reader makes a request's record
anew only when the request changed, returning the previous state itself when nothing did."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from matrix.adapters.protocol import FINISHED, LOADING, RUNNING, SchedulerState
from matrix.adapters.snapshots import StateReader
from matrix.frozen import fast_init
from matrix.run.records import RunTrace


@dataclass(frozen=True)
class Plain:
    pool: int
    stopped: str
    message: str = ""
    reserved: int | None = None


@fast_init
@dataclass(frozen=True)
class Fast:
    pool: int
    stopped: str
    message: str = ""
    reserved: int | None = None


def test_fast_init_keeps_the_signature_defaults_and_immutability() -> None:
    assert inspect.signature(Fast.__init__) == inspect.signature(Plain.__init__)
    fast = Fast(3, "stuck", reserved=2)
    assert dataclasses.astuple(fast) == dataclasses.astuple(Plain(3, "stuck", reserved=2))
    assert fast == Fast(pool=3, stopped="stuck", message="", reserved=2)
    assert hash(fast) == hash(Fast(3, "stuck", "", 2))
    assert dataclasses.replace(fast, message="m") == Fast(3, "stuck", "m", 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.pool = 4  # type: ignore[misc]
    with pytest.raises(TypeError):
        Fast(3)  # type: ignore[call-arg]
    # The records that use it keep what dataclasses generated for them.
    assert RunTrace(4, (), "finished").reserved is None


def test_fast_init_refuses_what_it_cannot_fill() -> None:
    @dataclass(frozen=True)
    class Factory:
        items: list[int] = field(default_factory=list)

    @dataclass(frozen=True, slots=True)
    class Slotted:
        pool: int

    @dataclass
    class Mutable:
        pool: int

    for cls in (Factory, Slotted, Mutable):
        with pytest.raises(TypeError):
            fast_init(cls)


WORDS = {"waiting_for_load": LOADING, "running": RUNNING}


def request(status: str, computed: int = 0) -> SimpleNamespace:
    return SimpleNamespace(status=status, num_computed_tokens=computed, num_preemptions=0)


def test_an_unchanged_scheduler_reads_as_the_same_state() -> None:
    reader = StateReader(WORDS)
    live = {"a": request("waiting_for_load"), "b": request("running", 8)}
    first = reader.read(["a", "b"], live.get, set().__contains__, 10)
    assert [r.status for r in first.requests] == [LOADING, RUNNING]
    assert reader.read(["a", "b"], live.get, set().__contains__, 10) is first
    # One request moved on: a new state, the other request's record the same object.
    live["b"] = request("running", 9)
    second = reader.read(["a", "b"], live.get, set().__contains__, 10)
    assert second is not first and second.requests[0] is first.requests[0]
    assert second.requests[1].num_computed_tokens == 9
    # The free blocks, a reported load and a request leaving the scheduler all count.
    assert reader.read(["a", "b"], live.get, set().__contains__, 9) is not second
    reported = reader.read(["a", "b"], live.get, {"a"}.__contains__, 9)
    assert reported.requests[0].load_reported_done
    del live["a"]
    gone = reader.read(["a", "b"], live.get, {"a"}.__contains__, 9)
    assert gone.requests[0].status == FINISHED
    assert gone == SchedulerState((gone.requests[0], reported.requests[1]), 9)
