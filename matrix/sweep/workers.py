"""The sweep's forked workers: this process imported vLLM once; each of a fixed number of
chunks of the architectures (contiguous in name order, so that architectures sharing a model
module mostly share a worker, which imports that module once) runs in a fork of it, at most
``jobs`` at a time. Which architectures share a process does not depend on the machine, so a
sweep gives the same rows on any number of cores.

A worker answers one architecture after another up a pipe (a line naming it as it starts, its
row as JSON when done); each has :data:`ARCHITECTURE_SECONDS` before an alarm ends it as an
``error`` row. A worker that dies leaves a row naming the architecture it was deriving, and a
fresh fork takes the rest of its chunk: no architecture goes missing, none silently.
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType

from matrix import wording
from matrix.case.baselines import Row
from matrix.lifeline import Children
from matrix.progress import ProgressLine
from matrix.sweep.scope import Architecture

CHUNKS = 2
ARCHITECTURE_SECONDS = 120  # one architecture's derivation: about 0.02 s, 0.3 s at most seen


class ArchitectureTimeout(Exception):
    """An architecture's derivation ran past its time."""


@dataclass
class _Running:
    """A worker in flight: its chunk's architectures not yet answered, the one it is on."""

    pid: int
    pipe: int
    left: list[Architecture]
    current: str | None = None
    buffer: str = ""
    rows: list[Row] = field(default_factory=list)


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise ArchitectureTimeout(f"took over {ARCHITECTURE_SECONDS} s")


def _work(architectures: Sequence[Architecture], folder: Path, write: int) -> None:
    """A worker's body (in the fork): each architecture's row, in order, up the pipe."""
    from vllm.model_executor.models import registry

    from matrix.sweep.derive import derive_row, inspect_here, timed_out_row

    # A worker is thrown away after its chunk: vLLM's model inspection can run in it, and
    # each model module is imported once per worker rather than once per inspection's fork.
    registry._run_in_subprocess = inspect_here
    logging.disable(logging.ERROR)  # for good: vLLM's and transformers' logs say nothing here
    signal.signal(signal.SIGALRM, _alarm)
    for architecture in architectures:
        os.write(write, f"start\t{architecture.name}\n".encode())
        signal.alarm(ARCHITECTURE_SECONDS)
        try:
            row = derive_row(architecture, folder)
        except ArchitectureTimeout as timeout:
            row = timed_out_row(architecture, str(timeout))
        finally:
            signal.alarm(0)
        os.write(write, f"row\t{json.dumps(asdict(row))}\n".encode())


def _fork(architectures: list[Architecture], folder: Path, children: Children) -> _Running:
    read, write = os.pipe()
    pid = children.fork()  # it dies with this process
    if pid == 0:  # the worker: answer, then leave without running anything of the parent's
        code = 0
        try:
            os.close(read)
            _work(architectures, folder, write)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    return _Running(pid, read, list(architectures))


def _take(worker: _Running, chunk: str) -> list[Row]:
    """The rows a worker's output completes."""
    worker.buffer += chunk
    *lines, worker.buffer = worker.buffer.split("\n")
    finished = []
    for line in lines:
        kind, _, value = line.partition("\t")
        if kind == "start":
            worker.current = value
        elif kind == "row":
            row = Row(**json.loads(value))
            finished.append(row)
            worker.left = [a for a in worker.left if a.name != row.architecture]
            worker.current = None
    return finished


def chunks_of(architectures: Sequence[Architecture]) -> list[list[Architecture]]:
    """The architectures in :data:`CHUNKS` contiguous chunks (a worker each)."""
    size = -(-len(architectures) // CHUNKS) or 1
    return [list(architectures[i : i + size]) for i in range(0, len(architectures), size)]


def run_workers(
    chunks: Sequence[list[Architecture]],
    folder: Path,
    jobs: int,
    progress: Callable[[Row], None],
) -> list[Row]:
    """Every architecture's row, a forked worker a chunk, ``jobs`` at a time; an interrupt
    (Ctrl-C, SIGTERM) kills the workers on its way out."""
    children = Children()
    with children.watching():
        return _run_workers(chunks, folder, jobs, progress, children)


def _run_workers(
    chunks: Sequence[list[Architecture]],
    folder: Path,
    jobs: int,
    progress: Callable[[Row], None],
    children: Children,
) -> list[Row]:
    from matrix.sweep.derive import died_row

    waiting = [list(chunk) for chunk in chunks if chunk]
    running: dict[int, _Running] = {}
    rows: list[Row] = []
    selector = selectors.DefaultSelector()
    while waiting or running:
        while waiting and len(running) < jobs:
            worker = _fork(waiting.pop(0), folder, children)
            running[worker.pipe] = worker
            selector.register(worker.pipe, selectors.EVENT_READ)
        for key, _ in selector.select():
            worker = running[key.fd]
            chunk = os.read(key.fd, 65536).decode()
            for row in _take(worker, chunk) if chunk else []:
                rows.append(row)
                progress(row)
            if chunk:
                continue
            selector.unregister(key.fd)
            os.close(key.fd)
            del running[key.fd]
            _, status = children.reap(worker.pid)
            if worker.current is not None:  # it died deriving this one: a row says so
                dead = next(a for a in worker.left if a.name == worker.current)
                row = died_row(dead, os.waitstatus_to_exitcode(status))
                rows.append(row)
                progress(row)
                worker.left.remove(dead)
            if worker.left:  # the rest of its chunk, in a fresh fork
                waiting.insert(0, worker.left)
    return rows


class SweepProgress:
    """The sweep's progress on stderr (:class:`matrix.progress.ProgressLine`): architectures
    answered of the total, the layouts among them, the time left."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.layouts = 0
        self.line = ProgressLine("sweep", "architecture", sys.stderr)

    def __call__(self, row: Row) -> None:
        """One more architecture answered."""
        self.done += 1
        self.layouts += row.status == "layout"
        detail = wording.plural(self.layouts, "layout")
        if self.done == self.total:
            self.line.end(self.done, self.total, detail)
        else:
            self.line.show(self.done, self.total, detail)
