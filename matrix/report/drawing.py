"""Every picture of a report drawn once: in a few fresh interpreters when there are many (a
picture takes about 0.1 s of CPU, a failing cell has one), and kept for the report's next file
(its Markdown's folder and its HTML page show the same pictures)."""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

from matrix import wording
from matrix.installed import cache_base
from matrix.judge.result import CellResult
from matrix.report import cell_pictures, figures, gallery, tables
from matrix.report import pictures as picture_code
from matrix.report.gallery import Picture, cells_of, planned
from matrix.report.pictures import Job, draw_job

# Pictures are drawn in up to this many processes, each given at least PER_PROCESS of them
# (a process takes a second or two to start: fewer pictures are drawn in this one).
PROCESSES, PER_PROCESS = 4, 16
# A drawing process dies with the process that asked for it (matrix.lifeline).
_WORKER = (
    "import pickle, sys; from matrix.lifeline import die_with_parent; "
    "die_with_parent(int(sys.argv[1])); from matrix.report.pictures import draw_job; "
    "pickle.dump([draw_job(job) for job in pickle.load(sys.stdin.buffer)], sys.stdout.buffer)"
)


def _draw_elsewhere(jobs: list[Job], processes: int) -> list[str]:
    """The jobs drawn in fresh interpreters (never a fork of this one, which may hold vLLM and
    torch, nor a re-run of its main module), a share each; here if one of them fails."""
    shares = [jobs[i::processes] for i in range(processes)]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def draw_share(share: list[Job]) -> list[str]:
        command = [sys.executable, "-c", _WORKER, str(os.getpid())]
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


def draw_ahead(cells: Sequence[CellResult], release: str) -> None:
    """The cells' own pictures drawn here, into the picture store: a forked worker's, while
    the other workers still run cells, so that the report its parent writes from every
    worker's cells finds them drawn (the heat map and the models' strips, drawn from every
    cell, are the parent's)."""
    draw_all([p for p in planned(cells) if p.cell is not None], cells, release, here=True)


def draw_all(
    pictures: Sequence[Picture], cells: Sequence[CellResult], release: str, here: bool = False
) -> dict[str, str]:
    """Every picture's SVG by name, drawn in a process per core (up to four) when there are
    many (``here``: in this process); kept for the next file of the same report, and on disk
    for the next report that draws the same picture (drawing is deterministic: the same
    inputs, the same file)."""
    key = hash((tuple(cells), release))
    if _drawn_for != [key]:
        _drawn.clear()
        _drawn_for[:] = [key]
    missing = [p for p in pictures if p.name not in _drawn]
    jobs = [(p, cells_of(p, cells), release) for p in missing]
    stored = PictureStore()
    keys = [stored.key(job) for job in jobs]
    svgs = [stored.get(k) for k in keys]
    todo = [i for i, svg in enumerate(svgs) if svg is None]
    fresh = [jobs[i] for i in todo]
    processes = 1 if here else min(PROCESSES, os.cpu_count() or 1, len(fresh) // PER_PROCESS)
    drawn = _draw_elsewhere(fresh, processes) if processes > 1 else [draw_job(j) for j in fresh]
    for i, svg in zip(todo, drawn, strict=True):
        svgs[i] = svg
        stored.put(keys[i], svg)
    stored.prune()
    _drawn.update({p.name: svg or "" for p, svg in zip(missing, svgs, strict=True)})
    return {p.name: _drawn[p.name] for p in pictures}


class PictureStore:
    """Drawn pictures on disk, outside the clone (``cache_base()/pictures``), keyed by what
    draws them: the picture and its cells, the release, the drawing code and matplotlib's
    version. A warm run draws nothing it drew before."""

    KEEP = 5000  # the newest files kept; a report of every shipped cell draws about 300

    def __init__(self) -> None:
        self.folder = cache_base() / "pictures"
        self.code = _drawing_code()

    def key(self, job: Job) -> str:
        """The job's file name: a digest of everything the picture is drawn from."""
        return hashlib.sha256(f"{self.code}\n{job!r}".encode()).hexdigest()[:32] + ".svg"

    def get(self, key: str) -> str | None:
        """The stored picture, or None."""
        try:
            return (self.folder / key).read_text(encoding="utf-8")
        except OSError:
            return None

    def put(self, key: str, svg: str) -> None:
        """Stores a picture (written whole, then renamed: a reader never sees half a file)."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            partial = self.folder / f".{key}.{os.getpid()}"
            partial.write_text(svg, encoding="utf-8")
            partial.replace(self.folder / key)
        except OSError:
            pass  # a cache that cannot be written only costs the next run a drawing

    def prune(self) -> None:
        """Keeps the newest :attr:`KEEP` pictures."""
        try:
            files = sorted(self.folder.glob("*.svg"), key=lambda f: f.stat().st_mtime)
            for old in files[: max(0, len(files) - self.KEEP)]:
                old.unlink(missing_ok=True)
        except OSError:
            pass


# The modules a picture is drawn by (tables orders its cases and variants): an edit to any of
# them is a new drawing, not the stored one.
DRAWING_MODULES = (picture_code, gallery, figures, cell_pictures, tables, wording)


@functools.cache
def _drawing_code() -> str:
    """What draws the pictures: this package's drawing modules and matplotlib's version (read
    once a process: a report's every file draws with the same code)."""
    digest = hashlib.sha256(metadata.version("matplotlib").encode())
    for module in DRAWING_MODULES:
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:16]
