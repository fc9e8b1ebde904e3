"""The run's one progress line (matrix/progress.py) and the forked workers' share of it: every
worker's tests counted, the total once each has said its count, the time left past a few
seconds; rewritten in place on a terminal, a plain line per tenth elsewhere; and no worker's
scratch path in what the run prints."""

from __future__ import annotations

import io
from pathlib import Path

from matrix.progress import ETA_AFTER, ProgressLine
from matrix.runner.forked import Progress, WorkerResult, failure_text


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_line_says_the_total_and_the_time_left_past_a_few_seconds() -> None:
    clock = Clock()
    line = ProgressLine("matrix", "cell", io.StringIO(), clock)
    assert line.text(3, None) == "matrix: 3 cells, 0 s"
    assert line.text(10, 40, "1 failed") == "matrix: 10 of 40 cells (25%), 1 failed, 0 s"
    clock.now += ETA_AFTER + 1  # 4 s for 10 cells: 12 s for the other 30
    assert line.text(10, 40) == "matrix: 10 of 40 cells (25%), 4 s, about 12 s left"
    clock.now += 200
    assert line.text(40, 40) == "matrix: 40 of 40 cells (100%), 3 min 24 s"


def test_off_a_terminal_a_plain_line_per_tenth_past_a_few_seconds() -> None:
    stream, clock = io.StringIO(), Clock()
    line = ProgressLine("matrix", "cell", stream, clock)
    for done in range(1, 101):
        clock.now += 0.1
        line.show(done, 100)
    line.end(100, 100)
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    # Nothing in the first 3 s (30 cells); then a line per tenth.
    assert [line.split(" cells")[0] for line in lines] == [
        f"matrix: {done} of 100" for done in (31, 40, 50, 60, 70, 80, 90, 100)
    ]
    assert lines[-1] == "matrix: 100 of 100 cells (100%), 10 s"
    quick = io.StringIO()
    line = ProgressLine("matrix", "cell", quick, Clock())
    for done in range(1, 101):
        line.show(done, 100)
    line.end(100, 100)
    assert quick.getvalue() == "matrix: 100 of 100 cells (100%), 0 s\n"


def test_on_a_terminal_one_line_rewritten_in_place() -> None:
    stream, clock = Terminal(), Clock()
    line = ProgressLine("matrix", "cell", stream, clock)
    for done in range(1, 51):
        clock.now += 0.05
        line.show(done, 50)
    line.end(50, 50)
    text = stream.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n")
    drawn = text.split("\r")[1:]
    assert 15 <= len(drawn) <= 30  # about every other update (one per 0.1 s at most), the end
    assert drawn[-1].rstrip() == "matrix: 50 of 50 cells (100%), 2 s"


def test_every_workers_cells_make_the_one_line() -> None:
    """Two workers' pipes, their counts and letters interleaved: one line counts them all,
    with the total once both have said theirs."""
    stream = io.StringIO()
    progress = Progress(2, stream)
    progress.take(3, "2")  # worker 1's count, cut before its ';'
    progress.take(4, "3;..")
    progress.take(3, ";.F")
    progress.take(4, ".")
    progress.end()
    assert progress.letters == {3: ".F", 4: "..."}
    last = stream.getvalue().splitlines()[-1]
    assert last.startswith("matrix: 5 of 5 cells (100%), 1 failed, ")


def test_a_workers_failures_name_no_scratch_file(tmp_path: Path) -> None:
    scratch = tmp_path / "matrix-workers-x"
    scratch.mkdir()
    log = scratch / "worker-2-of-2.log"
    log.write_text(
        "..F\n"
        "=== FAILURES ===\n"
        "___ single_group[k=1]-none ___\n"
        "differs from its case\n"
        f"matrix report written to {scratch / 'worker-2-of-2.json'}\n"
        "=== short test summary info ===\n"
        "FAILED single_group[k=1]-none\n",
        encoding="utf-8",
    )
    result = WorkerResult(2, 1, "..F", log, scratch / "worker-2-of-2.json")
    text = failure_text(result)
    assert str(scratch) not in text and str(tmp_path) not in text
    assert text.startswith("=== FAILURES ===") and "FAILED single_group[k=1]-none" in text
