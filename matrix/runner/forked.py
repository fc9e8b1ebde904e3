"""Workers forked after vLLM's import: ``python -m matrix run`` pays the import (seconds) once
per machine, not once per worker.

The process imports vLLM through the adapter's selection, then forks ``workers`` children.
Each child is one worker's share of the run's files (``--matrix-worker W/M``, within the CI
shard's own, ``--splits``/``--group``, when it is one: whole files, matrix.case.split), runs
``pytest.main`` with its
output in a log file, and writes its cells as a shard report; each finished test sends one
letter up a pipe for the progress line. The parent prints the progress, then what failed, and
returns the reports for ``report/merge.py`` to combine, exactly as it combines CI shards.
Only POSIX systems fork: elsewhere the caller runs pytest in one process.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import selectors
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TextIO

import pytest

from matrix.lifeline import Children
from matrix.progress import ProgressLine

# The letters a finished test sends up its worker's pipe, as pytest's progress shows them.
LETTERS = {"passed": ".", "failed": "F", "skipped": "s", "error": "E"}


@dataclass(frozen=True)
class Worker:
    """A forked worker: its group of the split, process, pipe, and where its output went."""

    group: int
    pid: int
    pipe: int
    log: Path
    report: Path


@dataclass(frozen=True)
class WorkerResult:
    """How a worker ended: pytest's exit code, its letters, its log and its shard report."""

    group: int
    exit_code: int
    letters: str
    log: Path
    report: Path

    @property
    def junit(self) -> Path:
        """Where the worker wrote its JUnit XML, when asked to."""
        return self.report.parent / f"{self.report.stem}.xml"


class ProgressPipe:
    """A plugin in each worker: its number of tests once collected (``1715;``), then one
    letter up the pipe per finished test."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Sends how many tests the worker will run."""
        os.write(self.fd, f"{len(session.items)};".encode())

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Sends the test's letter once: for its call, or for a setup that did not pass."""
        if report.when == "call" or (report.when == "setup" and not report.passed):
            outcome = "error" if report.when == "setup" and report.failed else report.outcome
            os.write(self.fd, LETTERS[outcome].encode())


def import_vllm_once() -> float:
    """Imports vLLM and picks the adapter (the workers' first cells find both done); seconds."""
    began = time.monotonic()
    from matrix.adapters.selection import adapter_or_refusal

    adapter_or_refusal()
    return time.monotonic() - began


def import_pytest_plugins(leave: str = "") -> None:
    """Imports the installed pytest plugins (pytest11 entry points) here, before the fork:
    each worker's ``pytest.main`` then finds them imported instead of importing them again (a
    second or so each). ``leave``: a top-level package not to import (a checkout's own)."""
    for plugin in metadata.entry_points(group="pytest11"):
        if plugin.module.split(".")[0] != leave:
            with contextlib.suppress(Exception):  # the worker's pytest says what is wrong
                importlib.import_module(plugin.module)


def fork_workers(
    pytest_args: Sequence[str], splits: int, folder: Path, junit: bool, children: Children
) -> list[Worker]:
    """Forks ``splits`` workers (each dies with this process: ``children``); each runs
    ``pytest_args`` on its share of the files and writes its shard report in ``folder`` (and,
    with ``junit``, its JUnit XML beside it)."""
    folder.mkdir(parents=True, exist_ok=True)
    workers = []
    for group in range(1, splits + 1):
        log = folder / f"worker-{group}-of-{splits}.log"
        report = folder / f"worker-{group}-of-{splits}.json"
        read, write = os.pipe()
        pid = children.fork()
        if pid == 0:  # the worker
            os.close(read)
            xml = [f"--junitxml={folder / f'worker-{group}-of-{splits}.xml'}"] if junit else []
            _worker([*pytest_args, *xml], group, splits, log, report, write)
        os.close(write)
        workers.append(Worker(group, pid, read, log, report))
    return workers


def _worker(
    pytest_args: Sequence[str], group: int, splits: int, log: Path, report: Path, pipe: int
) -> None:
    """Runs the worker's group with its output in ``log``; never returns."""
    code = 3
    try:
        with log.open("w", encoding="utf-8") as output:
            os.dup2(output.fileno(), 1)
            os.dup2(output.fileno(), 2)
            args = [
                *pytest_args,
                f"--matrix-worker={group}/{splits}",
                f"--matrix-report={report}",
                "--matrix-no-tables",
            ]
            code = int(pytest.main(args, plugins=[ProgressPipe(pipe)]))
    finally:
        sys.stdout.flush()
        os._exit(code)


def wait_for(workers: Sequence[Worker], children: Children) -> list[WorkerResult]:
    """Prints the workers' letters as they come (pytest's progress lines), then waits for each
    to end; a worker killed by a signal ends with pytest's internal-error code."""
    progress = Progress(len(workers))
    selector = selectors.DefaultSelector()
    for worker in workers:
        selector.register(worker.pipe, selectors.EVENT_READ)
    while selector.get_map():
        for key, _ in selector.select():
            chunk = os.read(key.fd, 4096).decode()
            if chunk:
                progress.take(key.fd, chunk)
            else:
                selector.unregister(key.fd)
                os.close(key.fd)
    progress.end()
    results = []
    for worker in workers:
        _, status = children.reap(worker.pid)
        code = os.waitstatus_to_exitcode(status)
        results.append(
            WorkerResult(
                worker.group,
                code if code >= 0 else int(pytest.ExitCode.INTERNAL_ERROR),
                progress.letters.get(worker.pipe, ""),
                worker.log,
                worker.report,
            )
        )
    return results


class Progress:
    """The run's one progress line (:class:`matrix.progress.ProgressLine`) over its workers'
    pipes: their tests done, of the total once every worker has said its count, the failures
    so far."""

    def __init__(self, workers: int, stream: TextIO | None = None) -> None:
        self.workers = workers
        self.totals: dict[int, int] = {}
        self.letters: dict[int, str] = {}
        self._pending: dict[int, str] = {}  # a count not yet ended by its ';'
        self.line = ProgressLine("matrix", "cell", stream or sys.stdout)

    def take(self, fd: int, chunk: str) -> None:
        """What a worker's pipe said: its count first, then letters."""
        if fd not in self.totals:
            said = self._pending.get(fd, "") + chunk
            if ";" not in said:
                self._pending[fd] = said
                return
            count, chunk = said.split(";", 1)
            self.totals[fd] = int(count)
        self.letters[fd] = self.letters.get(fd, "") + chunk
        self.line.show(*self._state())

    def _state(self) -> tuple[int, int | None, str]:
        letters = "".join(self.letters.values())
        total = sum(self.totals.values()) if len(self.totals) == self.workers else None
        failed = letters.count(LETTERS["failed"]) + letters.count(LETTERS["error"])
        return len(letters), total, f"{failed} failed" if failed else ""

    def end(self) -> None:
        """Ends the line."""
        self.line.end(*self._state())


def failure_text(result: WorkerResult) -> str:
    """What a worker's log says about its failures: pytest's sections from the first of
    FAILURES, ERRORS or the short summary on (the whole log if it has none of them), without
    the lines naming its scratch files (the run writes the reports, and says where)."""
    scratch = str(result.log.parent)
    lines = result.log.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    text = "".join(line for line in lines if scratch not in line)
    starts = [
        text.find(f" {title} ")
        for title in ("FAILURES", "ERRORS", "short test summary info")
        if f" {title} " in text
    ]
    if not starts:
        return text
    start = text.rfind("\n", 0, min(starts)) + 1
    return text[start:]


def exit_code(results: Sequence[WorkerResult]) -> int:
    """The run's exit code from its workers': the worst but "no tests" wins over passing only
    when every worker had none."""
    codes = [r.exit_code for r in results]
    worst = [c for c in codes if c not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)]
    if worst:
        return max(worst)
    if all(c == pytest.ExitCode.NO_TESTS_COLLECTED for c in codes):
        return int(pytest.ExitCode.NO_TESTS_COLLECTED)
    return int(pytest.ExitCode.OK)


def counts(results: Sequence[WorkerResult]) -> str:
    """``1713 passed, 2 failed``: the workers' tests by outcome."""
    letters = "".join(r.letters for r in results)
    parts = [
        f"{letters.count(letter)} {name}"
        for name, letter in LETTERS.items()
        if letters.count(letter)
    ]
    return ", ".join(parts) or "no tests ran"
