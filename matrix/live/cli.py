"""``python -m matrix live``: the live session's command line (docs/live.md)."""

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
    live.add_argument("-k", dest="keyword", default="", help="only cells whose id contains this")
    live.add_argument(
        "--variant", action="append", choices=VARIANT_NAMES, dest="variants", help="repeatable"
    )
    live.add_argument(
        "--report",
        action="append",
        type=Path,
        help="write the report (.md or .json); default reports/live-<version>.{md,json}",
    )


def run(args: argparse.Namespace) -> int:
    """Runs the live session, prints and writes its report; the exit status."""
    from matrix.case.reading import CaseFileError
    from matrix.live.report import exit_status, terminal_text, write
    from matrix.live.session import Options, run_session

    if args.hang_steps < 1:
        print("--hang-steps: at least 1", file=sys.stderr)
        return 2
    for path in args.report or ():
        if path.suffix not in (".md", ".json"):
            print(f"--report {path}: use a .md or .json file name", file=sys.stderr)
            return 2
    options = Options(
        paths=tuple(args.paths) or (shipped_cases(),),
        pools=args.live_pools,
        hang_steps=args.hang_steps,
        keyword=args.keyword,
        variants=tuple(args.variants or VARIANT_NAMES),
    )
    try:
        report = run_session(options, say=lambda line: print(line, flush=True))
    except CaseFileError as error:
        print(error, file=sys.stderr)
        return 2
    print(terminal_text(report))
    stem = f"live-{report.vllm_version}"
    for path in args.report or (REPORTS / f"{stem}.md", REPORTS / f"{stem}.json"):
        write(path, report)
        print(f"live report written to {path}")
    return exit_status(report)
