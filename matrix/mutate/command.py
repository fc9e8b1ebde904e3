"""``python -m matrix mutate`` (docs/mutate.md): the installed release's mutants against the
matrix's stock cells and, with ``--suite both`` or ``upstream``, vLLM's own tests; the kill
matrix, the survivors and the branch coverage written as ``reports/mutate-vllm-<version>.*``.

Each suite runs in a pytest session of its own (``loop``): the matrix's in this environment,
vLLM's tests as ``python -m matrix upstream`` runs them (its archive's ``tests/``, offline).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from matrix.case.reading import CaseFileError
from matrix.case.shipped import shipped_cases
from matrix.mutate.generate import Mutant, SurfaceError, surface_mutants, vllm_root
from matrix.mutate.results import Ending, MutantRow, MutationReport, SuiteInfo
from matrix.mutate.surface import surface_for

if TYPE_CHECKING:  # pytest and pydantic load when the command runs, not with the parser
    from matrix.mutate.loop import Plan
    from matrix.mutate.triage import Triage


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommand's options."""
    parser.add_argument(
        "--suite",
        choices=("matrix", "upstream", "both"),
        default="matrix",
        help="whose tests run the mutants: the matrix's stock cells, vLLM's own tests, or both",
    )
    parser.add_argument("--mutant", action="append", default=[], help="this mutant (repeatable)")
    parser.add_argument("-k", dest="keyword", default="", help="mutants whose id contains this")
    parser.add_argument("--shard", default="", metavar="K/N", help="every Nth mutant from the Kth")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="children at once")
    parser.add_argument("--budget", type=float, help="CPU seconds per mutant (default 120)")
    parser.add_argument(
        "--cases",
        type=Path,
        action="append",
        help="case files or folders (default: cases/ and, where present, adequacy_cases/)",
    )
    parser.add_argument(
        "--tier", default="quick", choices=("quick", "core", "all"), help="vLLM's tests' tier"
    )
    parser.add_argument("--fresh", action="store_true", help="measure coverage again")
    parser.add_argument("--out", type=Path, default=Path("reports"))
    parser.add_argument(
        "--triage", type=Path, help="default: matrix/mutate/triage/vllm-<version>.yaml"
    )
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        metavar="SHARD",
        help="merge these shard reports (mutate-vllm-X-shard-K-of-N.json) into one; no vLLM",
    )


def _selected(mutants: list[Mutant], options: argparse.Namespace) -> list[Mutant]:
    chosen = [m for m in mutants if options.keyword in m.id]
    if options.mutant:
        known = {m.id for m in mutants}
        unknown = [m for m in options.mutant if m not in known]
        if unknown:
            raise SurfaceError(f"no mutant {unknown[0]} in this release (see --list)")
        chosen = [m for m in chosen if m.id in options.mutant]
    if options.shard:
        group, _, splits = options.shard.partition("/")
        if not (group.isdigit() and splits.isdigit() and 1 <= int(group) <= int(splits)):
            raise SurfaceError(f"--shard {options.shard}: K/N with 1 <= K <= N")
        chosen = chosen[int(group) - 1 :: int(splits)]
    return chosen


def case_folders() -> list[Path]:
    """The matrix's case folders whose stock cells make the suite: the main job's (the shipped
    cases) and the adequacy cases written for what they missed (a checkout's). The connector
    cases (`--cases connector_cases`) add 360 stock cells that reach the admission path, each
    run by every mutant that survives there: 37 CPU-s a survivor of schedule's lookup on 0.33,
    against 1-3 without them."""
    folders = [shipped_cases(), shipped_cases().parent / "adequacy_cases"]
    return [folder for folder in folders if folder.is_dir()]


def _session(suite: str, plan: Plan, options: argparse.Namespace, version: str) -> int:
    """Runs one suite's pytest session with the plan; its exit code."""
    loop = ["-p", "matrix.mutate.loop", "--mutate-plan", plan.out + ".plan"]
    if suite == "matrix":
        cases = [str(p) for p in (options.cases or case_folders())]
        command = [sys.executable, "-m", "pytest", *cases, "-m", "stock", "-q"]
        command += ["-p", "no:cacheprovider", *loop]
        env = {**os.environ, "MATRIX_PICTURES": "off"}
        return subprocess.call(command, env=env)
    from matrix.upstream.driver import run_pytest, tier_paths
    from matrix.upstream.expected import expected_path, load_expected
    from matrix.upstream.source import fetch_tests

    root = fetch_tests(version)
    where = expected_path(version)
    paths = tier_paths(load_expected(where), options.tier, root, where, drop=False)
    run_pytest(root, paths, "0", loop, None)
    return 0


def _run_suite(
    suite: str, mutants: list[Mutant], options: argparse.Namespace, version: str, scratch: Path
) -> dict[str, Any]:
    from matrix.installed import vllm_cache_root
    from matrix.mutate.loop import Plan

    bounds = {"budget": options.budget} if options.budget else {}
    out = scratch / f"{suite}.json"
    plan = Plan(
        suite,
        [m.id for m in mutants],
        str(out),
        str(vllm_cache_root() / "mutate"),
        max(1, options.jobs),
        bounds,
        options.fresh,
    )
    plan.write(Path(plan.out + ".plan"))
    print(f"matrix mutate: {len(mutants)} mutants against {suite}", file=sys.stderr)
    code = _session(suite, plan, options, version)
    if not out.is_file():
        raise SurfaceError(f"the {suite} session ended with {code} and no outcomes")
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result


def _rows(
    mutants: list[Mutant], triage: Triage, runs: dict[str, dict[str, Any]]
) -> tuple[MutantRow, ...]:
    endings: dict[str, dict[str, Ending]] = {m.id: {} for m in mutants}
    for suite, run in runs.items():
        items = run["items"]
        for outcome in run["outcomes"]:
            killer = outcome["killer"]
            endings[outcome["mutant"]][suite] = Ending(
                outcome["status"],
                items[killer] if killer is not None else "",
                outcome["how"],
                outcome["items_run"],
                round(outcome["cpu"], 3),
                outcome["detail"],
            )
    return tuple(
        MutantRow(
            m.id,
            m.function,
            m.diff,
            triage.equivalent.get(m.id, ""),
            endings[m.id],
            triage.gaps.get(m.id, ""),
        )
        for m in mutants
    )


def _info(run: dict[str, Any]) -> SuiteInfo:
    items = run["items"]
    failing = tuple(items[i] for i in run["failing_items"])
    return SuiteInfo(len(items), failing, run["cpu"], run["wall"], run["baseline_cpu"])


def _merge(paths: list[Path], out: Path) -> int:
    from matrix.mutate.merge import MergeError, merged
    from matrix.report.mutation import contradicted, report_lines, write_report

    try:
        report = merged(paths)
    except (MergeError, CaseFileError) as error:
        print(f"matrix mutate --merge: {error}", file=sys.stderr)
        return 2
    print("\n".join(report_lines(report, terminal=True)))
    written = write_report(report, out)
    print(f"matrix mutate: wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    return 1 if contradicted(report) else 0


def main(options: argparse.Namespace) -> int:
    """Runs the mutants; 0 when every suite ran them, 1 when a claimed-equivalent mutant was
    killed (the claim is wrong), 2 when nothing could run."""
    if options.merge:
        return _merge(options.merge, options.out)
    from matrix.installed import installed_vllm_version
    from matrix.mutate.branches import branch_coverage
    from matrix.mutate.triage import load_triage, triage_path
    from matrix.report.mutation import contradicted, report_lines, write_report

    version = installed_vllm_version()
    if version is None:
        print("matrix mutate: vLLM is not installed (use tox -e mutate034)", file=sys.stderr)
        return 2
    try:
        targets = surface_for(version)
        everything, missing = surface_mutants(targets, vllm_root())
        mutants = _selected(everything, options)
        triage = load_triage(options.triage or triage_path(version), everything)
        if options.list:
            for mutant in mutants:
                print(f"{mutant.id}\t{mutant.diff}")
            return 0
        suites = ("matrix", "upstream") if options.suite == "both" else (options.suite,)
        with tempfile.TemporaryDirectory() as scratch:
            runs = {s: _run_suite(s, mutants, options, version, Path(scratch)) for s in suites}
    except (SurfaceError, CaseFileError) as error:
        print(f"matrix mutate: {error}", file=sys.stderr)
        return 2
    arcs = {
        s: {f: [tuple(a) for a in arcs] for f, arcs in r["arcs"].items()} for s, r in runs.items()
    }
    report = MutationReport(
        version,
        _rows(mutants, triage, runs),
        {s: _info(r) for s, r in runs.items()},
        branch_coverage(targets, vllm_root(), arcs),
        tuple(missing),
        options.shard,
    )
    print("\n".join(report_lines(report, terminal=True)))
    written = write_report(report, options.out)
    print(f"matrix mutate: wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    wrong = contradicted(report)
    for row in wrong:
        print(f"matrix mutate: {row.id} is claimed equivalent but was killed", file=sys.stderr)
    return 1 if wrong else 0
