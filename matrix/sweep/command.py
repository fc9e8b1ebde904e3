"""``python -m matrix sweep``: every architecture in scope on the installed vLLM (or those
``--only`` names), its layout class or named reason, printed and compared with the release's
committed baseline (``matrix/sweep/baselines/vllm-<version>.tsv``): exit 1 when an
architecture's class or reason changed, a new one appeared or one went, each named. What a
sweep found is kept per release in the check cache (keyed by the install and the matrix code),
so a second sweep of an unchanged install answers without importing vLLM.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from pydantic import TypeAdapter

from matrix.case.baselines import (
    BaselineError,
    Row,
    baseline_path,
    changes,
    committed,
    load_rows,
    write_baseline,
)
from matrix.case.limits import MAX_WORKERS
from matrix.case.reading import one_line
from matrix.installed import installed_vllm_version
from matrix.releases import env_name, newest_release
from matrix.sweep.summary import change_lines, cross_release_lines, summary_lines

ROWS = TypeAdapter(list[Row])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the ``sweep`` command's arguments to ``parser``."""
    parser.add_argument("--only", nargs="+", metavar="ARCH", help="sweep these architectures")
    parser.add_argument(
        "--config",
        type=Path,
        metavar="CONFIG_JSON",
        help="derive one model's config.json as the sweep derives an architecture: its layout "
        "class, the baseline's architectures of that class, the class cells that run it",
    )
    parser.add_argument(
        "--part",
        type=int,
        metavar="K",
        help="sweep the K-th of the fixed chunks the whole sweep's workers take (1 or 2)",
    )
    parser.add_argument(
        "--baseline", type=Path, help="compare with this file (default: the release's committed)"
    )
    parser.add_argument(
        "--record", action="store_true", help="write the release's baseline from this sweep"
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="derive afresh, not from the check cache"
    )
    parser.add_argument(
        "--jobs", type=int, default=min(os.cpu_count() or 1, MAX_WORKERS), help="workers at once"
    )
    parser.add_argument("--json", type=Path, help="write every architecture's row as JSON")
    parser.add_argument(
        "--cells",
        action="store_true",
        help="run the class cells (as python -m matrix run does the shipped cases): "
        "reports/sweep-vllm-<version>.*; pytest arguments after --",
    )
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.add_argument(
        "--write-cells",
        action="store_true",
        help="write the class cells' case files from the committed baselines (no vLLM)",
    )
    parser.add_argument(
        "--releases",
        action="store_true",
        help="print each architecture's class on every release with a baseline (no vLLM)",
    )


def _question() -> object:
    from matrix.sweep.derive import DEVICE, SWEPT_LENGTH
    from matrix.tools.check_store import plain_question

    return plain_question("sweep", {"device": DEVICE, "length": SWEPT_LENGTH})


def swept_rows(jobs: int, cached: bool = True) -> list[Row]:
    """Every architecture in scope's row: kept ones (unless not ``cached``), else from forked
    workers (then kept)."""
    from matrix.tools.check_store import Question

    asked = _question()
    if isinstance(asked, Question) and cached:
        kept = asked.answer(ROWS)
        if kept is not None:
            print(f"sweep: {len(kept)} architectures, as kept for this install", file=sys.stderr)
            return kept
    rows = derive_all(jobs)
    if isinstance(asked, Question) and not any(r.status == "error" for r in rows):
        asked.keep(ROWS.dump_python(rows, mode="json"))
    return rows


class SweepError(Exception):
    """What the command line asks that the sweep cannot do; the message is one line."""


def derive_all(jobs: int, only: list[str] | None = None, part: int | None = None) -> list[Row]:
    """Imports vLLM (once, saying so), then every architecture in scope (or ``only``, or the
    ``part``-th chunk) in forked workers, with progress on stderr; :class:`SweepError` for a
    name in ``only`` that is no architecture in scope."""
    from matrix.tools.check_cache import import_vllm_saying

    import_vllm_saying("sweep", "to derive every architecture's layout")
    from matrix.sweep.mapping import known_model_types, model_type_of
    from matrix.sweep.scope import in_scope
    from matrix.sweep.workers import SweepProgress, chunks_of, run_workers

    architectures = in_scope()
    if only is not None:
        names = [a.name for a in architectures]
        unknown = [name for name in only if name not in names]
        if unknown:
            raise SweepError(_not_in_scope(unknown[0], names))
        architectures = [a for a in architectures if a.name in only]
    chunks = chunks_of(architectures)
    if part is not None:  # as the whole sweep's worker takes it
        chunks = chunks[part - 1 : part]
    model_type_of("-", "-")  # the mapping's tables, built once here for every worker
    known_model_types()
    progress = SweepProgress(sum(len(chunk) for chunk in chunks))
    with tempfile.TemporaryDirectory(prefix="matrix-sweep-") as folder:
        rows = run_workers(chunks, Path(folder), max(1, jobs), progress)
    return sorted(rows, key=lambda row: row.architecture)


def _not_in_scope(name: str, names: list[str]) -> str:
    guess = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    hint = f": did you mean {guess[0]}?" if guess else ""
    return f"--only {name!r:.80}: not an architecture the sweep covers here{hint}"


def _baseline(options: argparse.Namespace, version: str) -> list[Row] | None:
    """The baseline to compare with: the one ``--baseline`` names (refused unless it reads),
    else the release's committed one, None where none is committed."""
    if options.baseline is None and not baseline_path(version).is_file():
        return None
    return load_rows(options.baseline or baseline_path(version))


def _arguments_problem(options: argparse.Namespace) -> str | None:
    """What is wrong with the sweep's flags, before anything is imported or derived."""
    from matrix.sweep.workers import CHUNKS

    if not 1 <= options.jobs <= MAX_WORKERS:
        return f"--jobs {options.jobs}: a number of workers from 1 to {MAX_WORKERS}"
    if options.part is not None and not 1 <= options.part <= CHUNKS:
        return f"--part {options.part}: 1 to {CHUNKS}"
    # A class name, or no architecture at all: said before vLLM's import.
    named = [name for name in options.only or [] if not name.isidentifier()]
    if named:
        return _not_in_scope(named[0], [])
    if options.json is not None and options.json.is_dir():
        return f"--json {options.json}: a folder, not a file to write"
    return None


def main(options: argparse.Namespace) -> int:
    """Runs the sweep the options ask for; returns the exit code."""
    problem = _arguments_problem(options)
    if problem is not None:
        print(f"matrix sweep: {one_line(problem)}", file=sys.stderr)
        return 2
    if options.cells:
        from matrix.runner.command import run_command
        from matrix.sweep.cells import CELLS

        return run_command([a for a in options.pytest_args if a != "--"], CELLS, "sweep")
    if options.write_cells:
        from matrix.sweep.cells import write_cells

        written = write_cells()
        print(f"sweep: wrote {len(written)} class case files in {written[0].parent}")
        return 0
    if options.releases:
        for line in cross_release_lines(committed()):
            print(line)
        return 0
    version = installed_vllm_version()
    if version is None:
        env = env_name(newest_release(), "sweep")
        print(f"matrix sweep: vLLM is not installed (use tox -e {env})", file=sys.stderr)
        return 2
    if options.config is not None:
        from matrix.sweep import one_config

        return one_config.main(options.config, version)
    try:
        baseline = _baseline(options, version)
    except BaselineError as error:
        print(f"matrix sweep: {error}", file=sys.stderr)
        return 2
    began = time.monotonic()
    only = set(options.only) if options.only else None
    try:
        if only or options.part:
            rows = derive_all(options.jobs, sorted(only) if only else None, options.part)
            only = {row.architecture for row in rows}
        else:
            rows = swept_rows(options.jobs, not options.no_cache)
    except SweepError as error:
        print(f"matrix sweep: {one_line(str(error))}", file=sys.stderr)
        return 2
    print(f"sweep: {time.monotonic() - began:.1f} s", file=sys.stderr)
    for line in summary_lines(rows):
        print(one_line(line))
    if options.json:
        try:
            options.json.parent.mkdir(parents=True, exist_ok=True)
            options.json.write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
        except OSError as error:
            print(f"matrix sweep: cannot write --json {options.json}: {error}", file=sys.stderr)
            return 2
    if options.record:
        if only:
            print("matrix sweep: --record takes the whole registry", file=sys.stderr)
            return 2
        write_baseline(baseline_path(version), rows)
        print(f"sweep: wrote {baseline_path(version)}")
        return 0
    if baseline is None:
        print(f"matrix sweep: no baseline for vLLM {version}: record one with --record")
        return 1
    held = [row for row in baseline if only is None or row.architecture in only]
    found = changes(held, rows)
    print()
    for line in change_lines(found, version):
        print(one_line(line))  # a baseline's names are input: never a terminal's escapes
    return 1 if found else 0
