"""The parent's side of the mutants' children: a few at a time, each forked from this process
(vLLM imported, the items collected, ``gc.freeze()``d), its lines read as they come, its
outcome decided when it ends.
"""

from __future__ import annotations

import gc
import json
import os
import selectors
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from matrix.mutate.child import HANG_EXIT, Bounds, RunItem, run_child

# A child silent this long (wall seconds) waits on something that uses no CPU: a hang. Far
# above any item's CPU bound, so a loaded machine never turns into a verdict.
SILENCE_S = 600.0


@dataclass(frozen=True)
class Job:
    """A mutant to run: its id, how it installs itself, the items covering it."""

    mutant: str
    install: Callable[[], None]
    covering: tuple[int, ...]


@dataclass(frozen=True)
class Outcome:
    """How a mutant ended against a suite."""

    mutant: str
    status: str  # killed, survived, undecided, not-covered, error
    killer: int | None = None  # the item that failed
    how: str = ""  # failed, hang, crash (killed); budget (undecided)
    items_run: int = 0
    cpu: float = 0.0
    detail: str = ""


@dataclass
class _Running:
    job: Job
    pid: int
    pipe: int
    last_heard: float
    events: list[dict[str, object]] = field(default_factory=list)
    buffer: bytes = b""


def _outcome(job: Job, events: list[dict[str, object]], exit_code: int, cpu: float) -> Outcome:
    ran = sum(1 for e in events if e["event"] == "end")
    for event in events:
        kind = event["event"]
        if kind == "end" and not event["passed"]:
            return Outcome(job.mutant, "killed", _item(event), "failed", ran, cpu)
        if kind == "hang":
            return Outcome(job.mutant, "killed", _item(event), "hang", ran, cpu)
        if kind == "budget":
            return Outcome(job.mutant, "undecided", None, "budget", ran, cpu)
        if kind == "error":
            return Outcome(job.mutant, "error", None, "", ran, cpu, str(event["detail"]))
    if any(e["event"] == "done" for e in events):
        return Outcome(job.mutant, "survived", None, "", ran, cpu)
    started = [e for e in events if e["event"] == "start"]
    if started:  # died inside an item: the mutant crashed the process
        how = "hang" if exit_code == HANG_EXIT else "crash"
        return Outcome(job.mutant, "killed", _item(started[-1]), how, ran, cpu)
    return Outcome(job.mutant, "error", None, "", ran, cpu, f"child ended with {exit_code}")


def _item(event: dict[str, object]) -> int:
    value = event["item"]
    assert isinstance(value, int)
    return value


def run_jobs(
    jobs: Sequence[Job],
    order: Callable[[Job], list[int]],
    baseline_cpu: Sequence[float],
    run_item: RunItem,
    bounds: Bounds,
    parallel: int,
    done: Callable[[Outcome], None],
) -> None:
    """Runs every job in a child of its own, ``parallel`` at a time; ``order`` gives a job's
    items when it starts (so kills so far reorder later jobs); ``done`` gets each outcome."""
    pending = list(jobs)
    running: dict[int, _Running] = {}
    selector = selectors.DefaultSelector()
    gc.collect()
    gc.freeze()  # the children share the parent's objects instead of copying them on GC
    try:
        while pending or running:
            while pending and len(running) < parallel:
                job = pending.pop(0)
                started = _start(job, order(job), baseline_cpu, run_item, bounds)
                running[started.pipe] = started
                selector.register(started.pipe, selectors.EVENT_READ)
            for key, _ in selector.select(timeout=1.0):
                child = running[int(key.fd)]
                if _read(child):
                    continue
                selector.unregister(child.pipe)
                done(_reap(running.pop(child.pipe)))
            now = time.monotonic()
            for pipe, child in list(running.items()):
                if now - child.last_heard > SILENCE_S:
                    os.kill(child.pid, signal.SIGKILL)
                    selector.unregister(pipe)
                    running.pop(pipe)
                    outcome = _reap(child)
                    done(
                        Outcome(
                            child.job.mutant, "killed", outcome.killer, "hang", outcome.items_run
                        )
                    )
    finally:
        for child in running.values():
            os.kill(child.pid, signal.SIGKILL)
            _reap(child)
        gc.unfreeze()


def _start(
    job: Job, order: list[int], baseline_cpu: Sequence[float], run_item: RunItem, bounds: Bounds
) -> _Running:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        run_child(write, job.install, order, baseline_cpu, run_item, bounds)
    os.close(write)
    return _Running(job, pid, read, time.monotonic())


def _read(child: _Running) -> bool:
    """Reads what the child sent; False at its end."""
    chunk = os.read(child.pipe, 65536)
    if not chunk:
        return False
    child.last_heard = time.monotonic()
    child.buffer += chunk
    *lines, child.buffer = child.buffer.split(b"\n")
    child.events.extend(json.loads(line) for line in lines if line)
    return True


def _reap(child: _Running) -> Outcome:
    os.close(child.pipe)
    _, status, usage = os.wait4(child.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return _outcome(child.job, child.events, code, usage.ru_utime + usage.ru_stime)
