"""The pytest plugin that runs a suite's items against every mutant of a plan, in the suite's
own pytest session (``-p matrix.mutate.loop --mutate-plan FILE``): the matrix's cells, or
vLLM's own tests in theirs.

The session collects as usual; this plugin then takes over the run loop. It imports vLLM and
the surface's modules once, makes the mutants again from the installed files (a mutant travels
by id), runs every item once under coverage (or reads that run from its cache), and forks a
child per mutant that runs the items reaching the mutated lines: items that killed an earlier
mutant first, then the cheapest, stopping at the first failure. It writes every outcome to the
plan's ``out`` file for ``python -m matrix mutate`` to report.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from matrix.mutate.child import Bounds, cpu_seconds
from matrix.mutate.coverage_map import Baseline, cache_key, load_cached, measure, store
from matrix.mutate.forks import Job, Outcome, run_jobs
from matrix.mutate.generate import Mutation, file_digest, mutations, vllm_root
from matrix.mutate.install import install
from matrix.mutate.surface import surface_for
from matrix.mutate.warm import warm

LETTERS = {"killed": ".", "survived": "S", "undecided": "u", "not-covered": "-", "error": "E"}


@dataclass(frozen=True)
class Plan:
    """What one suite's session is asked: which mutants, where to write, how."""

    suite: str  # "matrix" or "upstream"
    mutants: list[str]
    out: str
    cache: str  # folder of cached baselines
    jobs: int = 2
    bounds: dict[str, float] = field(default_factory=dict)
    fresh: bool = False  # measure the baseline again even when cached
    coverage_only: bool = False

    @classmethod
    def read(cls, path: Path) -> Plan:
        """The plan ``python -m matrix mutate`` wrote."""
        return cls(**json.loads(path.read_text(encoding="utf-8")))

    def write(self, path: Path) -> None:
        """For the suite's session to read."""
        path.write_text(json.dumps(asdict(self)), encoding="utf-8")


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--mutate-plan``."""
    parser.addoption("--mutate-plan", default=None, help="python -m matrix mutate's plan file")


def _run_item(items: list[pytest.Item]) -> Any:
    from _pytest.runner import runtestprotocol

    def run(index: int, following: int | None) -> bool:
        nextitem = items[following] if following is not None else None
        reports = runtestprotocol(items[index], nextitem=nextitem, log=False)
        return not any(report.failed for report in reports)

    return run


def _prepare(suite: str) -> tuple[str, dict[str, Mutation]]:
    """vLLM and the surface's modules imported; the installed release's mutants by id."""
    from matrix.installed import installed_vllm_version

    if suite == "matrix":
        from matrix.runner.forked import import_vllm_once

        import_vllm_once()
    version = installed_vllm_version() or ""
    targets = surface_for(version)
    root = vllm_root()
    found: dict[str, Mutation] = {}
    for target in targets:
        importlib.import_module(target.module)
        source = (root / target.module.replace(".", "/")).with_suffix(".py")
        found.update((m.mutant.id, m) for m in mutations(target, source.read_text("utf-8")))
    return version, found


def code_digest() -> str:
    """The matrix's code that the items run (all of it but this package, whose changes leave
    every item's coverage as it was)."""
    from matrix.case.shipped import PACKAGE

    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name != "mutate":
            digest.update(path.relative_to(PACKAGE).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def _baseline(
    plan: Plan, items: list[pytest.Item], files: dict[str, Path], version: str
) -> Baseline:
    ids = [item.nodeid for item in items]
    sources = sorted({str(item.path) for item in items})
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.encode() + Path(source).read_bytes())
    key = cache_key(
        plan.suite,
        version,
        code_digest(),
        digest.hexdigest(),
        *ids,
        *(f"{name}={file_digest(path)}" for name, path in sorted(files.items())),
    )
    path = Path(plan.cache) / f"{plan.suite}-{key}.json"
    cached = None if plan.fresh else load_cached(path)
    if cached is not None:
        print(f"mutate: {plan.suite} coverage from {path}", file=sys.stderr)
        return cached
    began = cpu_seconds()
    print(f"mutate: {plan.suite}: {len(items)} items under coverage ...", file=sys.stderr)
    baseline = measure(ids, files, _run_item(items), lambda: _warm(plan, items))
    store(path, baseline)
    print(f"mutate: coverage measured ({cpu_seconds() - began:.0f} CPU-s here)", file=sys.stderr)
    return baseline


def _warm(plan: Plan, items: list[pytest.Item]) -> None:
    if plan.suite == "matrix":
        warm(items)


def _warm_reaches(baseline: Baseline, found: dict[str, Mutation]) -> str:
    """The first mutated function the warm-up ran, or ""."""
    for mutation in found.values():
        function, file = mutation.function, mutation.mutant.file
        lines = baseline.warm_lines.get(file, ())
        if any(function.lineno < line <= (function.end_lineno or 0) for line in lines):
            return mutation.mutant.function
    return ""


def _import(modules: tuple[str, ...]) -> None:
    """Imports what the items imported lazily, here, before the forks."""
    for name in modules:
        with contextlib.suppress(Exception):  # a module the items' import left half-done
            importlib.import_module(name)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """Runs the plan instead of the session's tests (only when given one)."""
    where = session.config.getoption("mutate_plan")
    if not where:
        return None
    plan = Plan.read(Path(where))
    started, began = time.monotonic(), cpu_seconds()
    version, found = _prepare(plan.suite)
    unknown = [m for m in plan.mutants if m not in found]
    if unknown:
        raise pytest.UsageError(f"mutants not in the installed vLLM: {', '.join(unknown[:5])}")
    items = list(session.items)
    root = vllm_root()
    files = {m.mutant.file: root / m.mutant.file for m in found.values()}
    baseline = _baseline(plan, items, files, version)
    _import(baseline.modules)
    reached = _warm_reaches(baseline, found)
    if reached:
        print(f"mutate: the warm-up runs {reached}: not warmed", file=sys.stderr)
    else:
        _warm(plan, items)
    outcomes = [] if plan.coverage_only else _run_mutants(plan, found, baseline, items)
    payload = {
        "suite": plan.suite,
        "vllm": version,
        "items": list(baseline.items),
        "failing_items": [i for i, ok in enumerate(baseline.passed) if not ok],
        "baseline_cpu": round(sum(baseline.cpu), 2),
        "outcomes": [asdict(o) for o in outcomes],
        "arcs": {f: [list(a) for a in arcs] for f, arcs in baseline.arcs.items()},
        "cpu": round(cpu_seconds() - began + sum(o.cpu for o in outcomes), 2),
        "wall": round(time.monotonic() - started, 2),
    }
    Path(plan.out).write_text(json.dumps(payload), encoding="utf-8")
    return True


def _run_mutants(
    plan: Plan, found: dict[str, Mutation], baseline: Baseline, items: list[pytest.Item]
) -> list[Outcome]:
    kills: Counter[int] = Counter()
    outcomes: list[Outcome] = []
    jobs: list[Job] = []
    for mutant_id in plan.mutants:
        mutation = found[mutant_id]
        m = mutation.mutant
        covering = baseline.covering(m.file, m.line, m.end_line)
        if not covering:
            outcomes.append(Outcome(mutant_id, "not-covered"))
            continue

        def installing(mutation: Mutation = mutation) -> None:
            install(mutation.mutant.target, mutation.changed(in_place=True))

        jobs.append(Job(mutant_id, installing, tuple(sorted(covering))))

    def order(job: Job) -> list[int]:
        return sorted(job.covering, key=lambda i: (-kills[i], baseline.cpu[i], i))

    partial = Path(plan.out + ".partial")
    partial.write_text("", encoding="utf-8")

    def done(outcome: Outcome) -> None:
        if outcome.killer is not None:
            kills[outcome.killer] += 1
        outcomes.append(outcome)
        with partial.open("a", encoding="utf-8") as stream:  # read while the run goes on
            stream.write(json.dumps(asdict(outcome)) + "\n")
        sys.stderr.write(LETTERS[outcome.status])
        if len(outcomes) % 80 == 0:
            sys.stderr.write(f" {len(outcomes)}/{len(plan.mutants)}\n")
        sys.stderr.flush()

    bounds = Bounds(**plan.bounds)
    run_jobs(jobs, order, baseline.cpu, _run_item(items), bounds, plan.jobs, done)
    sys.stderr.write("\n")
    by_id = {o.mutant: o for o in outcomes}
    return [by_id[m] for m in plan.mutants]
