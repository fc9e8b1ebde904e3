"""One commit judged: its tree installed as vLLM for a fresh interpreter, the case's chosen
cells run there, the verdict compared with the old ref's. ``git bisect run`` starts
``python -m matrix.tools.bisect.step STATE`` at each commit it checks out, and reads the exit
code: 0 the same verdict as the old ref, 1 changed, 125 no verdict (skip).

The install is ``tox -e vllmdev``'s, Python only (:func:`matrix.tools.devsource.install_checkout`:
a ``vllm`` dist-info naming the tree, so its version answers ``importlib.metadata``), into a
scratch folder that the child's ``PYTHONPATH`` puts, with the tree, before this env's own
packages: the env and the user's checkout are never changed. Each child is bounded by the step
timeout and killed with everything it started. vLLM's model-inspection cache is keyed by the
model module's text alone, not by the code that inspects it: each version of that code gets a
cache root of its own, so a commit never reads what another commit's inspection found.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from time import monotonic
from typing import Any, Literal

from matrix.installed import git
from matrix.tools.bisect.verdict import CellVerdict, Verdicts, describe, dump, load, same
from matrix.tools.devsource import SourceError, install_checkout

REQUEST = "request.json"  # in the state folder: what every step judges
LOG = "steps.jsonl"  # in the state folder: one line per commit judged
# git bisect run's exit codes: old, new, skip, and (any above 127) stop bisecting. A Python
# error exits with 1, which git would read as "changed".
SAME, CHANGED, SKIP, ABORT = 0, 1, 125, 128
Mark = Literal["old", "new", "same", "changed", "skip"]


@dataclass(frozen=True)
class Request:
    """What each step of one bisect judges, and the old ref's verdict to compare with."""

    case: str  # an absolute path
    variant: str
    cells: tuple[str, ...]
    timeout: float  # seconds, per commit
    cache: str  # where the model-inspection cache roots are kept
    old: Verdicts = ()

    def save(self, state: Path) -> None:
        """Writes the request into the bisect's state folder."""
        data = {**asdict(self), "old": dump(self.old)}
        (state / REQUEST).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")

    @classmethod
    def read(cls, state: Path) -> Request:
        """The request :meth:`save` wrote."""
        data = json.loads((state / REQUEST).read_text(encoding="utf-8"))
        return cls(**{**data, "cells": tuple(data["cells"]), "old": load(data["old"])})


@dataclass(frozen=True)
class Judged:
    """One commit's verdict, or why it has none."""

    commit: str
    version: str | None
    verdicts: Verdicts
    problem: str | None  # why the commit has no verdict: it is skipped
    seconds: float

    def line(self, mark: Mark) -> str:
        """The commit's line in the command's output."""
        version = f" ({self.version})" if self.version else ""
        said = f"no verdict: {self.problem}" if self.problem else describe(self.verdicts)
        return f"  {self.commit[:12]}{version} {mark}: {said} [{self.seconds:.0f} s]"

    def as_dict(self, mark: Mark) -> dict[str, Any]:
        """JSON-ready, with how it was marked."""
        return {**asdict(self), "verdicts": dump(self.verdicts), "mark": mark}


# What vLLM's model inspection runs: its cache is keyed by the model module's text alone.
INSPECTION_CODE = tuple(
    f"vllm/model_executor/models/{name}.py"
    for name in ("registry", "interfaces", "interfaces_base")
)


def inspection_cache(cache: Path, tree: Path) -> Path:
    """The vLLM cache root for the commit checked out in ``tree``: one per version of the
    inspection code, shared by the commits that have it (a bisect's neighbours, mostly)."""
    blobs = [git(tree, "rev-parse", f"HEAD:{path}") or "-" for path in INSPECTION_CODE]
    key = hashlib.sha256(" ".join(blobs).encode()).hexdigest()[:16]
    return cache / "bisect" / f"inspection-{key}"


def _environment(site: Path, tree: Path, cache_root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(site), str(tree), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    env["VLLM_CACHE_ROOT"] = str(cache_root)
    env.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    env.setdefault("PYTHONWARNINGS", "ignore")
    return env


class _Judging:
    """A commit being judged: its tree installed and its case's child started (or why not)."""

    def __init__(self, tree: Path, request: Request, scratch: Path) -> None:
        self.started = monotonic()
        self.deadline = self.started + request.timeout
        self.timeout = request.timeout
        self.commit = git(tree, "rev-parse", "HEAD") or "unknown"
        self.version: str | None = None
        self.child: subprocess.Popen[bytes] | None = None
        self.problem: str | None = None
        self.verdicts: Verdicts = ()
        shutil.rmtree(scratch, ignore_errors=True)
        site = scratch / "site"
        site.mkdir(parents=True)
        try:
            self.version = install_checkout(tree, site)
        except SourceError as error:
            self.problem = f"cannot install: {error}"
            return
        self.out, self.output = scratch / "verdict.json", scratch / "output.log"
        command = [sys.executable, "-P", "-m", "matrix.tools.bisect.verdict", request.case]
        command += ["--variant", request.variant, "--out", str(self.out)]
        command += [arg for cell in request.cells for arg in ("--cell", cell)]
        env = _environment(site, tree, inspection_cache(Path(request.cache), tree))
        with self.output.open("wb") as output:
            # A process group of its own: ended with everything it started (kill).
            self.child = subprocess.Popen(
                command, cwd=scratch, env=env, stdout=output, stderr=output, start_new_session=True
            )

    def finish(self) -> Judged:
        """Waits for the child, within the step's timeout; the verdict or why there is none."""
        if self.child is not None and self.problem is None:
            try:
                self.child.wait(timeout=max(0.0, self.deadline - monotonic()))
            except subprocess.TimeoutExpired:
                self.kill()
                self.problem = f"the case ran past {self.timeout:.0f} s (--step-timeout)"
        if self.problem is None:
            self.problem = self._read()
        seconds = monotonic() - self.started
        return Judged(self.commit, self.version, self.verdicts, self.problem, seconds)

    def _read(self) -> str | None:
        assert self.child is not None
        if self.child.returncode != 0 or not self.out.is_file():
            lines = self.output.read_text(errors="replace").strip().splitlines() or ["no output"]
            return f"the case did not run (exit {self.child.returncode}): {lines[-1][:300]}"
        cells = json.loads(self.out.read_text(encoding="utf-8"))["cells"]
        self.verdicts = tuple(CellVerdict.from_result(cell) for cell in cells)
        return next(filter(None, (v.no_verdict() for v in self.verdicts)), None)

    def kill(self) -> None:
        """Ends the child and everything it started, if it still runs."""
        if self.child is not None and self.child.poll() is None:
            os.killpg(self.child.pid, signal.SIGKILL)
            self.child.wait()


def judge_commits(places: list[tuple[Path, Path]], request: Request) -> list[Judged]:
    """The verdicts of the commits checked out in each ``(tree, scratch)`` place, judged at
    once (``scratch``: a folder of the bisect's own, emptied and reused); every child is ended
    on the way out, Ctrl-C included."""
    judging: list[_Judging] = []
    try:
        judging += [_Judging(tree, request, scratch) for tree, scratch in places]
        return [commit.finish() for commit in judging]
    finally:
        for commit in judging:
            commit.kill()


def judge_commit(tree: Path, request: Request, scratch: Path) -> Judged:
    """The verdict of the commit checked out in ``tree`` (see :func:`judge_commits`)."""
    return judge_commits([(tree, scratch)], request)[0]


def mark_of(judged: Judged, old: Verdicts) -> Mark:
    """How ``git bisect`` marks a commit: its verdict against the old ref's."""
    if judged.problem:
        return "skip"
    return "same" if same(judged.verdicts, old) else "changed"


def record(state: Path, judged: Judged, mark: Mark) -> None:
    """Adds the commit to the bisect's log, which the command's summary reads."""
    with (state / LOG).open("a", encoding="utf-8") as log:
        log.write(json.dumps(judged.as_dict(mark)) + "\n")


def recorded(state: Path) -> list[dict[str, Any]]:
    """The log's entries, in the order the commits were judged."""
    path = state / LOG
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    return [json.loads(line) for line in lines]


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """``git bisect run``'s script: judges the commit checked out in the current folder."""
    signal.signal(signal.SIGTERM, _stop)  # the child is killed on the way out
    state = Path((argv if argv is not None else sys.argv[1:])[0])
    try:
        request = Request.read(state)
        judged = judge_commit(Path.cwd(), request, state / "scratch")
    except Exception:  # a fault here says nothing of the commit: it stops the bisect
        traceback.print_exc()
        return ABORT
    mark = mark_of(judged, request.old)
    record(state, judged, mark)
    print(judged.line(mark), file=sys.stderr, flush=True)
    return {"same": SAME, "changed": CHANGED}.get(mark, SKIP)


if __name__ == "__main__":
    sys.exit(main())
