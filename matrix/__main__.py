"""Command line: ``python -m matrix COMMAND``: run, connectors, merge, validate,
record-expectations, crossversion, schema, bench, show-layout, sweep, explore, live, upstream,
bisect, finding, releases, mutate."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from matrix.case.selection import FILTER_OPTIONS
from matrix.case.shipped import SUITES, shipped_cases
from matrix.variant_names import VARIANT_NAMES

DEFAULT_CASES = shipped_cases()
REPORTS = Path("reports")


def _explore_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    explore = commands.add_parser(
        "explore", help="search scenarios with Hypothesis; write each failure as a case file"
    )
    explore.add_argument("--variant", action="append", choices=VARIANT_NAMES, dest="variants")
    explore.add_argument("--budget", type=float, help="seconds (default 60 without examples)")
    explore.add_argument("--max-examples", type=int, help="scenarios drawn, over all jobs")
    explore.add_argument("--seed", type=int, default=0)
    explore.add_argument("--jobs", type=int, default=1, help="processes")
    explore.add_argument("--out", type=Path, default=DEFAULT_CASES / "found")
    explore.add_argument("--fit-slack", type=int, help="default: one block per attention group")
    explore.add_argument(
        "--database",
        type=Path,
        default=Path(".hypothesis/explore"),
        help="Hypothesis's example database, per release and variants (--no-database: none)",
    )
    explore.add_argument("--no-database", action="store_true")
    explore.add_argument(
        "--deployable",
        action="store_true",
        help="only pools a real engine can have: at least the fit and vLLM's startable pool",
    )
    explore.add_argument(
        "--escalate",
        type=Path,
        metavar="FINDING",
        help="search a finding's deployment consequence: 2-4 requests of its shape (deadlocks)",
    )
    explore.add_argument(
        "--mutant",
        metavar="ID",
        help="scenarios whose verdict this mutant changes (python -m matrix mutate --list)",
    )
    explore.add_argument(
        "--tightness",
        action="store_true",
        help="also scan each scenario's over-reservation (pools above its fit; slower)",
    )


def _explore(options: argparse.Namespace) -> int:
    variants = tuple(options.variants or ["stock"])
    if options.escalate is not None:  # a bad file is a line now, not after vLLM's import
        from matrix.explore.escalation import finding_problem, not_failing

        problem = finding_problem(options.escalate) or not_failing(options.escalate, variants)
        if problem is not None:
            print(f"matrix explore --escalate: {problem}", file=sys.stderr)
            return 2
    from matrix.explore import search
    from matrix.installed import installed_vllm_version

    if options.mutant is not None:  # checked before the search starts
        from matrix.explore.mutant import UnknownMutant, check_mutant

        try:
            check_mutant(options.mutant)
        except UnknownMutant as error:
            print(f"matrix explore --mutant: {error}", file=sys.stderr)
            return 2

    database = None
    if not options.no_database:
        searched = f"mutant-{options.mutant}" if options.mutant else "+".join(variants)
        database = options.database / f"vllm-{installed_vllm_version()}" / searched
    budget = options.budget
    if budget is None and options.max_examples is None:
        budget = 60.0
    return search.main(
        search.Options(
            variants,
            options.seed,
            budget,
            options.max_examples,
            max(1, options.jobs),
            options.out,
            database,
            options.fit_slack,
            options.tightness,
            options.deployable,
            options.escalate,
            options.mutant,
        )
    )


def _upstream_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from matrix.upstream import driver as upstream

    upstream.add_arguments(
        commands.add_parser("upstream", help="vLLM's own tests on this env (docs/upstream.md)")
    )


def main(argv: list[str] | None = None) -> int:
    """The command line: runs the command ``argv`` names; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m matrix", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run", help="run every case and print the tables (pytest args after --)"
    )
    connectors = commands.add_parser(
        "connectors",
        help="run every connector case (connector_cases/) as run does the shipped cases: "
        "reports/connectors-vllm-<version>.* (pytest args after --)",
    )
    adequacy = commands.add_parser(
        "adequacy",
        help="run the cases of behaviours and decisions the table cases do not reach "
        "(adequacy_cases/): reports/adequacy-vllm-<version>.* (pytest args after --)",
    )
    for suite in (run, connectors, adequacy):
        for name, what in FILTER_OPTIONS:
            suite.add_argument(
                f"--{name}",
                action="append",
                default=[],
                metavar="NAME",
                help=f"only the cells {what}; repeatable; the reports say the run was filtered",
            )
        suite.add_argument("pytest_args", nargs=argparse.REMAINDER)
    merge = commands.add_parser(
        "merge", help="merge shard reports (--splits/--group runs) into each release's report"
    )
    merge.add_argument("shards", nargs="+", type=Path, help="shard JSON reports or folders")
    merge.add_argument("--out", type=Path, default=REPORTS, help="where to write the reports")
    merge.add_argument(
        "--full-terminal", action="store_true", help="print every table, not the headline's"
    )
    validate = commands.add_parser("validate", help="check case files without running them")
    validate.add_argument("paths", nargs="*", type=Path, default=[DEFAULT_CASES])
    validate.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="MODULE:NAME",
        help="a variant of your own the cases may name (as pytest's --matrix-variant)",
    )
    record = commands.add_parser(
        "record-expectations",
        help="write a JSON report's observed verdicts into the case files' expect:/when: "
        "(review with git diff)",
    )
    record.add_argument("report", type=Path, help="a run's JSON report (reports/vllm-*.json)")
    record.add_argument(
        "paths",
        nargs="*",
        type=Path,
        help="case files or folders (default: the shipped cases and connector cases)",
    )
    record.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    commands.add_parser("schema", help="print the case files' JSON Schema")
    cross = commands.add_parser(
        "crossversion",
        help="stock across releases and the fidelity checks, from the envs' JSON reports",
    )
    cross.add_argument("reports", nargs="*", type=Path, default=[REPORTS])
    cross.add_argument("--out", type=Path, default=REPORTS, help="where to write the report")
    cross.add_argument(
        "--suite",
        choices=[s for s in SUITES if s],
        default="",
        help="another suite's reports (connectors-vllm-*.json): <suite>-cross-version.*",
    )
    cross.add_argument(
        "--release",
        action="append",
        default=[],
        metavar="VERSION",
        help="only this release's report, which must be there (repeatable); one release "
        "named owes no check across releases (the CI player's --release)",
    )
    bench = commands.add_parser("bench", help="print speed figures")
    bench.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    bench.add_argument(
        "--max-overhead",
        type=float,
        metavar="RATIO",
        help="measure the harness overhead alone; exit 1 above RATIO",
    )
    bench.add_argument(
        "--guard", action="store_true", help="--max-overhead at CI's guard (tox -e bench)"
    )
    from matrix.tools import show_layout

    show_layout.add_arguments(
        commands.add_parser("show-layout", help="the KV cache groups vLLM derives for a model")
    )
    from matrix.sweep import command as sweep_command

    sweep_command.add_arguments(
        commands.add_parser(
            "sweep", help="every registry architecture's layout class, against the baseline"
        )
    )
    _explore_parser(commands)
    from matrix.live import cli as live_cli

    live_cli.add_parser(commands)
    _upstream_parser(commands)
    from matrix.tools.bisect import driver as bisect

    bisect.add_arguments(
        commands.add_parser("bisect", help="the first vLLM commit where a case's verdict changes")
    )
    from matrix.findings import issue as finding

    finding.add_arguments(commands.add_parser("finding", help="a finding as a vLLM bug report"))
    from matrix.release_process import command as releases

    releases.add_arguments(
        commands.add_parser("releases", help="vLLM's releases on the index; add one, probe it")
    )
    from matrix.mutate import command as mutate

    mutate.add_arguments(
        commands.add_parser("mutate", help="mutation analysis of vLLM's reservation code")
    )
    options = parser.parse_args(argv)
    if options.command == "mutate":
        return mutate.main(options)
    if options.command == "bisect":
        return bisect.main(options)
    if options.command == "finding":
        return finding.main(options)
    if options.command == "releases":
        return releases.main(options)
    if options.command == "live":
        return live_cli.run(options)
    if options.command == "upstream":
        from matrix.upstream import driver as upstream

        return upstream.main(options)
    if options.command == "sweep":
        return sweep_command.main(options)
    if options.command == "show-layout":
        return show_layout.main(options)
    if options.command == "explore":
        return _explore(options)
    if options.command in ("run", "connectors", "adequacy"):
        from matrix.case.shipped import ADEQUACY_CASES, CONNECTOR_CASES
        from matrix.runner.command import run_command

        filters = [
            f"--matrix-{name}={value}"
            for name, _ in FILTER_OPTIONS
            for value in vars(options)[name]
        ]
        pytest_args = [*filters, *(a for a in options.pytest_args if a != "--")]
        if options.command == "run":
            return run_command(pytest_args)
        folder = CONNECTOR_CASES if options.command == "connectors" else ADEQUACY_CASES
        return run_command(pytest_args, folder, options.command)
    if options.command == "merge":
        from matrix.report import merge as merge_module

        return merge_module.main(options.shards, options.out, options.full_terminal)
    if options.command == "validate":
        from matrix.tools.validate import validate_files

        return validate_files(options.paths, options.variant)
    if options.command == "record-expectations":
        from matrix.case.shipped import CONNECTOR_CASES
        from matrix.tools.record_expectations import main as record_main

        paths = options.paths or [DEFAULT_CASES, CONNECTOR_CASES]
        return record_main(options.report, paths, options.dry_run)
    if options.command == "crossversion":
        from matrix.report import crossversion

        return crossversion.main(options.reports, options.out, options.suite, options.release)
    if options.command == "schema":
        from matrix.case.format import CaseFile

        print(json.dumps(CaseFile.model_json_schema(), indent=2))
        return 0
    from matrix.tools import bench as bench_module

    limit = bench_module.GUARD if options.guard else options.max_overhead
    return bench_module.main(options.cases, limit)


def interrupted_main() -> int:
    """:func:`main`, a Ctrl-C or a SIGTERM ending it in one line, not a traceback (what the
    command started is ended by then: matrix.lifeline)."""
    from matrix.lifeline import Terminated, ending_as_interrupts, exit_status

    try:
        with ending_as_interrupts():
            return main()
    except Terminated as ended:
        print(f"matrix: ended by {ended}", file=sys.stderr)
        return exit_status(ended.signum)
    except KeyboardInterrupt:
        print("matrix: interrupted", file=sys.stderr)
        return exit_status(signal.SIGINT)


if __name__ == "__main__":
    sys.exit(interrupted_main())
