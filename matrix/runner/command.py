"""``python -m matrix run [-- pytest args]``: every shipped case on the installed vLLM, the
tables printed, reports under ``reports/``; or, with ``--splits N --group K``, one shard of a
CI split, its report under ``reports/shards/`` for ``python -m matrix merge``.

With more than one worker (the default: one per core, up to four) vLLM is imported here once
and the workers are forked after it (``forked``); their shard reports are combined by the same
code that merges CI shards, so a forked run reports exactly what one process would.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from matrix.case.expansion import CASE_SUFFIXES
from matrix.case.reading import special_file
from matrix.case.shipped import shipped_cases
from matrix.installed import installed_source, installed_vllm_version
from matrix.lifeline import Children, Terminated, exit_status
from matrix.releases import env_name, newest_release
from matrix.report.files import (
    EMPTY_RUN,
    FULL_TERMINAL,
    REPORT_SUFFIXES,
    Shard,
    empty_shard_line,
    filtered_note,
    print_summary,
    shown_in,
    write_report,
)
from matrix.report.merge import merge_shards, report_stem
from matrix.report.shard_reports import MergeError, load_shard
from matrix.runner.forked import (
    counts,
    exit_code,
    failure_text,
    fork_workers,
    import_pytest_plugins,
    import_vllm_once,
    wait_for,
)
from matrix.runner.junit import combine_junit
from matrix.runner.plan import DURATIONS, PlanError, RunPlan, plan_run

REPORTS = Path("reports")


def run_command(pytest_args: Sequence[str], cases: Path | None = None, suite: str = "") -> int:
    """Runs the plan the arguments make over ``cases`` (the shipped ones unless given, the
    ``suite`` its reports are named after); pytest's exit code (4 for arguments it cannot
    run)."""
    special = _special_case_file(pytest_args)
    if special is not None:
        print(f"matrix {suite or 'run'}: {special}", file=sys.stderr)
        return int(pytest.ExitCode.USAGE_ERROR)
    version = installed_vllm_version()
    if version is None:
        env = env_name(newest_release())
        print(f"matrix: cannot run: vLLM is not installed (use tox -e {env})", file=sys.stderr)
        return 2
    try:
        plan = plan_run(pytest_args)
    except PlanError as error:
        print(f"matrix run: {error}", file=sys.stderr)
        return int(pytest.ExitCode.USAGE_ERROR)
    dev = installed_source() is not None
    outputs = _outputs(plan, report_stem(version, dev, suite))
    # vLLM's import brings pytest plugins (anyio's) before pytest starts: nothing to rewrite.
    quiet = ["-W", "ignore::pytest.PytestAssertRewriteWarning"]
    folder = cases or shipped_cases()
    named = [f"--matrix-suite={suite}"] if suite else []
    common = [str(folder), "-q", *quiet, *named, *_durations(plan, folder)]
    if plan.xdist:  # xdist's workers import vLLM each, after their GPU is pinned
        return int(pytest.main([*common, *_shard_args(plan, outputs), *plan.pytest_args]))
    # Outside every cell: no cell's time carries it, and with workers it is paid once.
    print(f"matrix: importing vLLM {version} ...", flush=True)
    print(f"matrix: imported in {import_vllm_once():.1f} s", flush=True)
    if plan.forked:
        import_pytest_plugins()
        return _forked(plan, [*common, *plan.pytest_args], outputs)
    args = [*common, *_shard_args(plan, outputs), *plan.pytest_args]
    return int(pytest.main(args))


def _special_case_file(pytest_args: Sequence[str]) -> str | None:
    """A case file or test module named among pytest's arguments that is a FIFO or a device
    (a link to ``/dev/zero``), which pytest's collection would pass over as "not found": said
    as what it is, in one line, before vLLM's import."""
    for arg in pytest_args:
        path = Path(arg.split("::", 1)[0])
        if path.suffix in (*CASE_SUFFIXES, ".py") and (problem := special_file(path)):
            return f"{arg}: cannot read: {problem}"
    return None


def _shard_args(plan: RunPlan, outputs: list[Path]) -> list[str]:
    """pytest's arguments for one process's run: the reports, the split, xdist's workers."""
    split = plan.shard_args()
    junit = [f"--junitxml={p}" for p in outputs if p.suffix == ".xml"]
    reports = [f"--matrix-report={p}" for p in outputs if p.suffix != ".xml"]
    workers = ["-n", str(plan.workers)] if plan.xdist else []
    return [*reports, *junit, *split, *workers]


def _outputs(plan: RunPlan, name: str) -> list[Path]:
    """The files the run writes (``name``: the release's report's): a shard's JSON and JUnit
    XML, or the release's JSON, Markdown (and its pictures) and HTML page; and those the
    arguments ask for."""
    if plan.shard:
        group, splits = plan.shard
        stem = REPORTS / "shards" / f"{name}.shard-{group}-of-{splits}"
        written = [stem.parent / f"{stem.name}.json", stem.parent / f"{stem.name}.xml"]
    else:
        stem = REPORTS / name
        written = [stem.parent / f"{stem.name}{suffix}" for suffix in REPORT_SUFFIXES]
    if plan.junitxml:
        written = [p for p in written if p.suffix != ".xml"] + [plan.junitxml]
    return written + [p for p in plan.reports if p not in written]


def _durations(plan: RunPlan, cases: Path) -> list[str]:
    """pytest-split's recorded durations: the cases folder's, unless the arguments name some."""
    named = any(a.startswith("--durations-path") for a in plan.pytest_args)
    recorded = cases / DURATIONS
    return [] if named or not recorded.is_file() else [f"--durations-path={recorded}"]


def _forked(plan: RunPlan, pytest_args: list[str], outputs: list[Path]) -> int:
    """The workers forked from this process, which imported vLLM; their reports combined and
    written, the tables printed."""
    began = time.monotonic()
    splits = plan.workers
    children = Children()
    with tempfile.TemporaryDirectory(prefix="matrix-workers-") as scratch:
        try:
            junit = any(p.suffix == ".xml" for p in outputs)
            # Pictures for a Markdown or HTML report: each worker draws its cells' own.
            pictured = any(p.suffix in (".md", ".html") for p in outputs)
            args = [
                *pytest_args,
                *plan.shard_args(),
                *(["--matrix-draw-ahead"] if pictured else []),
            ]
            with children.watching():  # the workers die with this process, however it ends
                workers = fork_workers(args, splits, Path(scratch), junit, children)
                results = wait_for(workers, children)
        except Terminated as ended:
            print(f"matrix: ended by {ended}; its workers were killed", file=sys.stderr)
            return exit_status(ended.signum)
        except KeyboardInterrupt:
            print("matrix: interrupted; its workers were killed", file=sys.stderr)
            return int(pytest.ExitCode.INTERRUPTED)
        for result in results:
            if result.exit_code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
                print(f"\n--- what failed in worker {result.group} of {splits} ---")
                print(failure_text(result))
        code = exit_code(results)
        try:
            reports = [load_shard(r.report) for r in results if r.report.is_file()]
            merged = merge_shards(reports)  # the workers' shares make this run, or CI shard
        except MergeError as error:
            print(f"matrix: the workers' reports do not make the run: {error}", file=sys.stderr)
            return code or int(pytest.ExitCode.INTERNAL_ERROR)
        selected = tuple(c for r in reports for c in r.shard.selected)
        shard = (
            Shard(*plan.shard, selected, reports[0].shard.selection, reports[0].shard.suite)
            if plan.shard
            else None
        )
        xml = [p for p in outputs if p.suffix == ".xml"]
        if xml:
            combine_junit([r.junit for r in results], xml[0])
    cells = list(merged.cells)
    written = shown_in(outputs, FULL_TERMINAL in pytest_args)
    if cells and print_summary(cells, merged.info, written) and code == pytest.ExitCode.OK:
        code = int(pytest.ExitCode.TESTS_FAILED)
    if not cells and code == pytest.ExitCode.OK:  # the workers were told it may be empty
        print(empty_shard_line(*plan.shard) if plan.shard else EMPTY_RUN)
    for path in outputs:
        if path.suffix != ".xml":
            write_report(path, cells, merged.info, shard)
        print(f"matrix report written to {path}")
    note = filtered_note(cells, merged.info)
    if note:
        print(note)
    elapsed = time.monotonic() - began
    print(f"{counts(results)} in {elapsed:.1f}s ({plan.workers} workers forked after the import)")
    return code
