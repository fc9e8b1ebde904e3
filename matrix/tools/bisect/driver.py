"""``python -m matrix bisect CASE OLD NEW``: the first commit of a vLLM checkout
(``--source``, default ``VLLM_SOURCE``) between two refs where a case's verdict changes.

The user's checkout is never touched: everything happens in a scratch worktree of it (``git
worktree add``), where ``git bisect run`` drives :mod:`matrix.tools.bisect.step`; the bisect
is reset and the worktree removed on every way out, Ctrl-C and SIGTERM included. The two refs
are judged first: the old ref's verdict is what every other commit is compared with, and the
refs must differ. Exit code 0: the commit was found; 1: the refs give the same verdict, or
only commits without a verdict are left; 2: bad arguments or a ref without a verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from matrix.case.shipped import FINDINGS, shipped_cases
from matrix.installed import cache_base, git
from matrix.tools.bisect.step import Judged, Request, judge_commits, mark_of, recorded
from matrix.tools.bisect.verdict import SelectionError, describe, load, select_cells

FOUND = re.compile(r"^([0-9a-f]{40}) is the first changed commit", re.M)
ONLY_SKIPPED = re.compile(r"could be any of:\n((?:[0-9a-f]{40}\n?)+)")


class BisectError(Exception):
    """What stops a bisect before it starts; the message is one line."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments (``python -m matrix bisect --help``)."""
    parser.add_argument(
        "case", help="a case file, or the name of a shipped case or of a finding (docs/findings)"
    )
    parser.add_argument("old", help="a ref with the old verdict (e.g. v0.30.0)")
    parser.add_argument("new", help="a later ref, whose verdict differs (e.g. main)")
    parser.add_argument(
        "--source",
        type=Path,
        default=os.environ.get("VLLM_SOURCE"),
        help="the vLLM git checkout (default: VLLM_SOURCE); it is never changed",
    )
    parser.add_argument("--variant", default="stock", help="bisect this variant's cells")
    parser.add_argument(
        "--cell",
        action="append",
        default=[],
        metavar="ID",
        help="bisect this cell only (its test id, e.g. 'two_inflight_loads-stock'); repeatable",
    )
    parser.add_argument(
        "--step-timeout", type=float, default=900, help="seconds per commit (default 900)"
    )
    parser.add_argument("--json", type=Path, help="also write the result as JSON here")


def case_path(named: str) -> Path:
    """A case file's path, or the file of a shipped case or a finding of that name."""
    for candidate in (Path(named), shipped_cases() / f"{named}.yaml", FINDINGS / f"{named}.yaml"):
        if candidate.is_file():
            return candidate.resolve()
    raise BisectError(f"{named}: no such case file, shipped case or finding")


def _commit(source: Path, ref: str) -> str:
    commit = git(source, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if not commit:
        raise BisectError(f"{source}: no commit {ref}")
    return commit


def _git(tree: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(tree), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise BisectError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


@contextmanager
def scratch_worktree(source: Path, tree: Path, commit: str) -> Iterator[Path]:
    """A detached worktree of ``source`` at ``commit`` in ``tree``, bisect reset and removed
    on exit."""
    _git(source, "worktree", "add", "--quiet", "--detach", str(tree), commit)
    try:
        yield tree
    finally:
        git(tree, "bisect", "reset")
        git(source, "worktree", "remove", "--force", str(tree))


@contextmanager
def _terminated_as_interrupted() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the worktree is cleaned up either way."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_bisect(tree: Path, state: Path) -> str:
    """``git bisect run`` with the step script; its output. Progress lines go to stderr."""
    command = ["git", "-C", str(tree), "bisect", "run", sys.executable, "-P", "-m"]
    command += ["matrix.tools.bisect.step", str(state)]
    # Its own session: Ctrl-C reaches this process only, which ends the steps in order.
    bisect = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        output, _ = bisect.communicate()
    finally:
        if bisect.poll() is None:
            os.killpg(bisect.pid, signal.SIGTERM)  # a step kills its case's process group
            try:
                bisect.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(bisect.pid, signal.SIGKILL)
    return output


def _judge_refs(
    source: Path, tree: Path, new: str, request: Request, state: Path
) -> tuple[Judged, Judged]:
    """The two refs' verdicts, judged at once: the old one checked out in ``tree``, ``new``
    in a second worktree."""
    with scratch_worktree(source, state / "new-ref", new) as other:
        places = [(tree, state / "scratch"), (other, state / "scratch-new")]
        before, after = judge_commits(places, request)
    print(before.line("old"), after.line("new"), sep="\n", flush=True)
    for judged, label in ((before, "old"), (after, "new")):
        if judged.problem:
            commit = judged.commit[:12]
            raise BisectError(f"the {label} ref {commit} has no verdict: {judged.problem}")
    return before, after


def bisect(options: argparse.Namespace) -> dict[str, Any]:
    """Runs the bisect the options describe; returns its result (the JSON report)."""
    case = case_path(options.case)
    cells = select_cells(case, options.variant, options.cell)
    if not options.source:
        raise BisectError("name the vLLM checkout: --source PATH or VLLM_SOURCE")
    source = Path(options.source).expanduser().resolve()
    if git(source, "rev-parse", "--git-dir") is None:
        raise BisectError(f"{source}: not a git checkout")
    old, new = _commit(source, options.old), _commit(source, options.new)
    ids = tuple(c.test_id for c in cells)
    request = Request(str(case), options.variant, ids, options.step_timeout, str(cache_base()))
    print(f"matrix bisect: {', '.join(request.cells)} ({case}), {source}")
    try:
        return _bisect_in_scratch(source, old, new, request, options)
    finally:
        # A worktree whose removal an interruption cut short is gone with the scratch folder:
        # its entry goes too, whatever moment Ctrl-C chose.
        git(source, "worktree", "prune")


def _bisect_in_scratch(
    source: Path, old: str, new: str, request: Request, options: argparse.Namespace
) -> dict[str, Any]:
    """The bisect in a scratch worktree of ``source`` (see :func:`bisect`)."""
    case = Path(request.case)
    with (
        tempfile.TemporaryDirectory(prefix="matrix-bisect-") as scratch,
        scratch_worktree(source, Path(scratch) / "tree", old) as tree,
    ):
        state = Path(scratch)
        before, after = _judge_refs(source, tree, new, request, state)
        result: dict[str, Any] = {
            "case": str(case),
            "cells": list(request.cells),
            "source": str(source),
            "old": before.as_dict("old"),
            "new": after.as_dict("new"),
            "steps": [],
        }
        if mark_of(after, before.verdicts) == "same":
            print(f"the verdict is the same at {options.old} and {options.new}: nothing to bisect")
            return {**result, "first_changed": None, "candidates": []}
        replace(request, old=before.verdicts).save(state)
        started = _git(tree, "bisect", "start", "--term-old=same", "--term-new=changed", new, old)
        output = started if FOUND.search(started) else _run_bisect(tree, state)
        result["steps"] = recorded(state)
        judged = [result["old"], result["new"], *result["steps"]]
        return {**result, **conclusion(tree, output, judged)}


def conclusion(tree: Path, output: str, judged: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``git bisect``'s ``output`` concludes: the first changed commit, with its verdict
    and subject, or the commits without a verdict it could be; printed, and for the JSON."""
    by_commit = {entry["commit"]: entry for entry in judged}
    found = FOUND.search(output)
    if not found:
        skipped = ONLY_SKIPPED.search(output)
        candidates = skipped.group(1).split() if skipped else []
        print(
            f"commits without a verdict leave the first changed commit one of "
            f"{len(candidates)}: {' '.join(c[:12] for c in candidates)}"
            if candidates
            else f"git bisect stopped: {output.strip()[-300:]}"
        )
        return {"first_changed": None, "candidates": candidates}
    commit = found.group(1)
    entry = by_commit[commit]
    subject = git(tree, "log", "-1", "--format=%s", commit) or ""
    print(f"first changed commit: {commit} ({entry['version']}) {subject}")
    parent = by_commit.get(git(tree, "rev-parse", f"{commit}^") or "")
    sides = [("there", entry), *([("before it", parent)] if parent else [])]
    for side, judged_there in sides:
        verdicts = load(judged_there["verdicts"])
        print(f"  {side}: {describe(verdicts)}")
        for detail in dict.fromkeys(v.detail for v in verdicts if v.observed == "fail"):
            print(f"    {detail[:400]}")
    return {"first_changed": {**entry, "subject": subject}, "candidates": []}


def main(options: argparse.Namespace) -> int:
    """The command: runs the bisect, prints and writes the result; returns the exit code."""
    try:
        with _terminated_as_interrupted():
            result = bisect(options)
    except (BisectError, SelectionError) as error:
        print(f"matrix bisect: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("matrix bisect: interrupted; the checkout is as it was", file=sys.stderr)
        return 130
    if options.json:
        options.json.parent.mkdir(parents=True, exist_ok=True)
        options.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0 if result["first_changed"] else 1
