"""Every picture of a report drawn once: in a few fresh interpreters when there are many (a
picture takes about 0.1 s of CPU, a failing cell has one), and kept for the report's next file
(its Markdown's folder and its HTML page show the same pictures)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from matrix.judge.result import CellResult
from matrix.report.gallery import Picture, cells_of
from matrix.report.pictures import Job, draw_job

# Pictures are drawn in up to this many processes, each given at least PER_PROCESS of them
# (a process takes a second or two to start: fewer pictures are drawn in this one).
PROCESSES, PER_PROCESS = 4, 16
_WORKER = (
    "import pickle, sys; from matrix.report.pictures import draw_job; "
    "pickle.dump([draw_job(job) for job in pickle.load(sys.stdin.buffer)], sys.stdout.buffer)"
)


def _draw_elsewhere(jobs: list[Job], processes: int) -> list[str]:
    """The jobs drawn in fresh interpreters (never a fork of this one, which may hold vLLM and
    torch, nor a re-run of its main module), a share each; here if one of them fails."""
    shares = [jobs[i::processes] for i in range(processes)]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def draw_share(share: list[Job]) -> list[str]:
        command = [sys.executable, "-c", _WORKER]
        done = subprocess.run(
            command, input=pickle.dumps(share), capture_output=True, env=environment, check=False
        )
        if done.returncode:
            return [draw_job(job) for job in share]
        svgs: list[str] = pickle.loads(done.stdout)  # our own child's answer
        return svgs

    with ThreadPoolExecutor(processes) as pool:
        drawn = list(pool.map(draw_share, shares))
    ordered = [""] * len(jobs)
    for index, svgs in enumerate(drawn):
        ordered[index::processes] = svgs
    return ordered


# The last report's pictures by name: its Markdown's folder and its HTML page draw them once.
_drawn: dict[str, str] = {}
_drawn_for: list[int] = []  # what they were drawn from (the cells and the release, hashed)


def draw_all(
    pictures: Sequence[Picture], cells: Sequence[CellResult], release: str
) -> dict[str, str]:
    """Every picture's SVG by name, drawn in a process per core (up to four) when there are
    many; kept for the next file of the same report."""
    key = hash((tuple(cells), release))
    if _drawn_for != [key]:
        _drawn.clear()
        _drawn_for[:] = [key]
    missing = [p for p in pictures if p.name not in _drawn]
    jobs = [(p, cells_of(p, cells), release) for p in missing]
    processes = min(PROCESSES, os.cpu_count() or 1, len(jobs) // PER_PROCESS)
    svgs = _draw_elsewhere(jobs, processes) if processes > 1 else [draw_job(j) for j in jobs]
    _drawn.update({p.name: svg for p, svg in zip(missing, svgs, strict=True)})
    return {p.name: _drawn[p.name] for p in pictures}
