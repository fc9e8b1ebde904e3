"""``python -m matrix live``: the live session's command line (docs/live.md). Every argument,
the case files and NIXL's side-channel port are checked before anything slow starts (the
engine's own tests, vLLM's import); flags that mean what pytest's mean have pytest's names
(``--matrix-report``, ``-k``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from matrix.case.shipped import shipped_cases
from matrix.live.outcome import POOL_CHOICES
from matrix.variant_names import VARIANT_NAMES

REPORTS = Path("reports")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``live`` command's arguments."""
    live = commands.add_parser(
        "live",
        help="run the cells a real vLLM engine can run on it, beside the harness (docs/live.md)",
    )
    live.add_argument(
        "paths", nargs="*", type=Path, help="case files or folders (default: shipped)"
    )
    live.add_argument(
        "--live-pools",
        choices=POOL_CHOICES,
        default="all",
        help="every pool the harness sweeps, or its failing pools and their neighbours (a "
        "passing cell: its fit and the pool below)",
    )
    live.add_argument(
        "--hang-steps",
        type=int,
        default=8,
        help="engine steps without progress that make a hang (default 8)",
    )
    live.add_argument(
        "-k",
        dest="keyword",
        default="",
        metavar="EXPRESSION",
        help="only cells matching this expression, as pytest's -k (words: substrings of the "
        "cell id or file name; and, or, not)",
    )
    live.add_argument(
        "--variant", action="append", choices=VARIANT_NAMES, dest="variants", help="repeatable"
    )
    live.add_argument(
        "--matrix-report",
        "--report",
        dest="reports",
        action="append",
        type=Path,
        metavar="PATH",
        help="write the report as Markdown (.md) or JSON (.json); repeatable; default "
        "reports/live-<version>.{md,json}",
    )
    live.add_argument(
        "--engine-tests",
        type=Path,
        metavar="ENV_DIR",
        help="first run the live engine's own tests (tests/test_live_engine.py), unless a "
        "marker in ENV_DIR says they passed on this install (the live envs pass theirs)",
    )


def run(args: argparse.Namespace) -> int:
    """Runs the live session, prints and writes its report; the exit status."""
    from matrix.live.port import PortTaken, claim_side_channel_port
    from matrix.live.report import exit_status, terminal_text, write
    from matrix.live.session import Options, run_session, session_cells

    problem = _argument_problem(args)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    options = Options(
        paths=tuple(args.paths) or (shipped_cases(),),
        pools=args.live_pools,
        hang_steps=args.hang_steps,
        keyword=args.keyword,
        variants=tuple(args.variants or VARIANT_NAMES),
    )
    cells, invalid = session_cells(options)
    for line in invalid:
        print(line, file=sys.stderr)
    if invalid and not cells:
        return 2
    try:
        claim_side_channel_port()  # before anything slow: a taken port is one line now
    except PortTaken as error:
        print(error, file=sys.stderr)
        return 2
    if args.engine_tests is not None:
        from matrix.live.engine_tests import run_engine_tests

        status = run_engine_tests(args.engine_tests, say=lambda line: print(line, flush=True))
        if status:
            print(f"the live engine's own tests failed (exit {status}): no session run")
            return status
    report = run_session(
        options, say=lambda line: print(line, flush=True), selection=(cells, invalid)
    )
    print(terminal_text(report))
    stem = f"live-{report.vllm_version}"
    for path in args.reports or (REPORTS / f"{stem}.md", REPORTS / f"{stem}.json"):
        write(path, report)
        print(f"live report written to {path}")
    return exit_status(report)


def _argument_problem(args: argparse.Namespace) -> str:
    """The first argument that cannot work, in one line ("" when they all can)."""
    from matrix.live.session import keyword_filter

    if args.hang_steps < 1:
        return "--hang-steps: at least 1"
    for path in args.reports or ():
        if path.suffix not in (".md", ".json"):
            return f"--matrix-report {path}: use a .md or .json file name"
    for path in args.paths:
        if not path.exists():
            return f"{path}: no such case file or folder"
    try:
        keyword_filter(args.keyword)
    except ValueError as error:
        return str(error)
    return ""
