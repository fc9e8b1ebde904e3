"""``python -m matrix explore``: searches the scenarios no one wrote a case for.

Hypothesis draws whole scenarios (``strategies``), each runs on the real scheduler under the
chosen variants (``trials``); a failure (a stall, an error, a request that fits
refused or never finished...) is shrunk by Hypothesis and written as a case file. Distinct
failures (variant, kind, layout family) raise distinct exception types, so Hypothesis shrinks
each on its own; its final replay of each minimal example is the last one recorded.

The search runs in rounds of a fixed number of examples, each seeded from ``--seed``, the job
and the round: the same seed and ``--max-examples`` give the same scenarios and files, and
``--budget`` is checked between rounds. A failure found in one round is not searched for
again in later ones. ``--jobs N`` runs N such searches in processes and keeps, per failure,
the simpler case.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, reject, seed, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from matrix.explore.escalation import crowds, finding_shape
from matrix.explore.strategies import Draw, scenarios
from matrix.explore.trials import Trial, smaller, trial, write_case

ROUND_EXAMPLES = 100
FIRST_ROUND = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
LATER_ROUNDS = (Phase.generate, Phase.target, Phase.shrink)
Key = tuple[str, str, str]
Progress = Callable[[int, int, int], None]  # job, scenarios so far, distinct failures so far


@dataclass(frozen=True)
class Options:
    """What ``python -m matrix explore`` was asked: variants, seed, budget, examples, jobs."""

    variants: tuple[str, ...]
    seed: int = 0
    budget: float | None = 60.0  # seconds per job; None: --max-examples alone bounds it
    max_examples: int | None = None  # over all jobs
    jobs: int = 1
    out: Path = Path("cases/found")
    database: Path | None = None  # Hypothesis's example database; None: none kept
    fit_slack: int | None = None  # None: trials.default_slack
    tightness: bool = False  # scan each scenario's over-reservation (more scheduler runs)
    # Only pools a real engine can have: from the larger of the fit and vLLM's startable up.
    deployable: bool = False
    # A finding whose deployment consequence to search (matrix/explore/escalation.py).
    escalate: Path | None = None
    # A mutant of the reservation surface: scenarios whose verdict it changes (mutant.py).
    mutant: str | None = None

    def examples_for(self, job: int) -> int | None:
        """The examples ``job`` draws: its share of ``max_examples``, or None when unbounded."""
        if self.max_examples is None:
            return None
        share, extra = divmod(self.max_examples, self.jobs)
        return share + (1 if job < extra else 0)


@dataclass(frozen=True)
class JobResult:
    """What one job's search found: scenarios run, seconds, failures and tightness counts."""

    scenarios: int
    seconds: float  # searching, after the one-off import
    findings: tuple[Trial, ...]
    tightness: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]  # variant -> label, count


class ScenarioFailed(Exception):
    """A drawn scenario failed; one subclass per distinct failure (see :func:`failure_type`)."""


_failure_types: dict[Key, type[ScenarioFailed]] = {}


def failure_type(key: Key) -> type[ScenarioFailed]:
    """Hypothesis tells bugs apart by exception type (and place), so each failure key gets its
    own type and is shrunk and reported on its own."""
    if key not in _failure_types:
        _failure_types[key] = type("_".join(key), (ScenarioFailed,), {})
    return _failure_types[key]


def round_seed(base: int, job: int, round_index: int) -> int:
    """The seed of one job's round: the same base, job and round always give the same seed."""
    digest = hashlib.sha256(f"{base}/{job}/{round_index}".encode()).hexdigest()
    return int(digest[:15], 16)


@dataclass
class Search:
    """One job's search: its rounds, the failures found, the scenarios run."""

    adapter: Any
    options: Options
    job: int
    progress: Progress
    found: dict[Key, Trial] = field(default_factory=dict)
    scenarios: int = 0
    tightness: dict[str, Counter[str]] = field(default_factory=dict)

    def run(self) -> JobResult:
        """Searches in rounds until the examples or the budget run out; returns what it found."""
        started = time.perf_counter()
        remaining = self.options.examples_for(self.job)
        round_index = 0
        while remaining is None or remaining > 0:
            budget = self.options.budget
            if budget is not None and time.perf_counter() - started >= budget:
                break
            examples = ROUND_EXAMPLES if remaining is None else min(ROUND_EXAMPLES, remaining)
            self.search_round(round_index, examples)
            remaining = None if remaining is None else remaining - examples
            round_index += 1
        self.progress(self.job, self.scenarios, len(self.found))
        tightness = tuple(
            (variant, tuple(sorted(counts.items()))) for variant, counts in self.tightness.items()
        )
        elapsed = time.perf_counter() - started
        return JobResult(self.scenarios, elapsed, tuple(self.found.values()), tightness)

    def strategy(self) -> st.SearchStrategy[Draw]:
        """What this search draws: any scenario, or crowds of an escalated finding."""
        if self.options.escalate is None:
            return scenarios()
        return crowds(*finding_shape(self.options.escalate))

    def search_round(self, round_index: int, examples: int) -> None:
        """One round of ``examples`` scenarios; keeps the failures not found before."""
        known = set(self.found)
        found: dict[Key, Trial] = {}
        database = self.options.database
        reported = [time.perf_counter()]

        @settings(
            max_examples=examples,
            database=DirectoryBasedExampleDatabase(database) if database else None,
            deadline=None,
            phases=FIRST_ROUND if round_index == 0 else LATER_ROUNDS,
            suppress_health_check=list(HealthCheck),
            verbosity=Verbosity.quiet,
            report_multiple_bugs=True,
        )
        @seed(round_seed(self.options.seed, self.job, round_index))
        @given(self.strategy())
        def check(draw: Draw) -> None:
            self.scenarios += 1
            if time.perf_counter() - reported[0] > 0.5:
                reported[0] = time.perf_counter()
                self.progress(self.job, self.scenarios, len(known) + len(found))
            options = self.options
            deployable = options.deployable or options.escalate is not None
            if options.mutant is not None:
                self.check_mutant(draw, options.mutant, known, found)
                return
            for variant in options.variants:
                result = trial(
                    self.adapter, draw, variant, options.fit_slack, options.tightness, deployable
                )
                if result is None:
                    reject()  # the release lacks a feature the scenario uses
                if result.tightness:
                    self.tightness.setdefault(variant, Counter())[result.tightness] += 1
                if options.escalate is not None:  # only a deadlock is the escalation sought
                    result = replace(
                        result, prefix="escalated", failed=result.severity == "deadlock"
                    )
                if result.failed and result.key not in known:
                    found[result.key] = result  # the last one recorded is the minimal one
                    raise failure_type(result.key)(result.detail)

        try:
            check()
        except ScenarioFailed:
            pass
        except BaseExceptionGroup as group:
            _, other = group.split(ScenarioFailed)
            if other is not None:
                raise other from None
        self.found.update(found)

    def check_mutant(
        self, draw: Draw, mutant: str, known: set[Key], found: dict[Key, Trial]
    ) -> None:
        """A scenario whose verdict the mutant changes is a finding (``explore --mutant``)."""
        from matrix.explore.mutant import difference

        options = self.options
        result = difference(self.adapter, draw, mutant, options.fit_slack, options.deployable)
        if result is None:
            reject()
        if result.failed and result.key not in known:
            found[result.key] = result
            raise failure_type(result.key)(result.detail)


def run_job(options: Options, job: int, queue: Any) -> JobResult:
    """One search, in this process or a worker's; progress goes to ``queue.put``."""
    from matrix.adapters.selection import select_adapter

    def progress(job: int, scenarios: int, failures: int) -> None:
        queue.put((job, scenarios, failures))

    return Search(select_adapter(), options, job, progress).run()


class StatusLine:
    """The live status line on stderr: scenarios run, their rate, failures so far."""

    def __init__(self, jobs: int) -> None:
        self.started = time.perf_counter()
        self.by_job: dict[int, tuple[int, int]] = {job: (0, 0) for job in range(jobs)}
        self.last_line = 0.0
        # Redrawn in place on a terminal; in a log, a line now and then.
        self.interval, self.end = (0.5, "\r") if sys.stderr.isatty() else (10.0, "\n")

    def put(self, progress: tuple[int, int, int]) -> None:
        """Records a job's progress and redraws the line when it is due."""
        job, scenarios, failures = progress
        self.by_job[job] = (scenarios, failures)
        now = time.perf_counter()
        if now - self.last_line < self.interval:
            return
        self.last_line = now
        total = sum(s for s, _ in self.by_job.values())
        failed = max(f for _, f in self.by_job.values())
        rate = total / (now - self.started)
        text = f"explore: {total} scenarios, {rate:.0f}/s, failures found: {failed}"
        print(text, end=self.end, file=sys.stderr, flush=True)


def search(options: Options) -> list[JobResult]:
    """Runs the jobs (in processes when more than one); returns each job's result."""
    status = StatusLine(options.jobs)
    if options.jobs == 1:
        return [run_job(options, 0, status)]
    context = multiprocessing.get_context("spawn")  # each worker imports vLLM on its own
    with context.Manager() as manager, ProcessPoolExecutor(options.jobs, context) as pool:
        queue = manager.Queue()
        futures = [pool.submit(run_job, options, job, queue) for job in range(options.jobs)]
        while not all(f.done() for f in futures):
            while not queue.empty():
                status.put(queue.get())
            time.sleep(0.2)
        return [f.result() for f in futures]


def merged(results: list[JobResult]) -> tuple[list[Trial], dict[str, Counter[str]]]:
    """The jobs' failures, the simpler case kept per key, and the tightness counts."""
    findings: dict[Key, Trial] = {}
    tightness: dict[str, Counter[str]] = {}
    for result in results:
        for found in result.findings:
            known = findings.get(found.key)
            findings[found.key] = found if known is None else smaller(known, found)
        for variant, counts in result.tightness:
            tightness.setdefault(variant, Counter()).update(dict(counts))
    return [findings[key] for key in sorted(findings)], tightness


def _label_order(label: str) -> tuple[int, int, str]:
    return (0, int(label), "") if label.isdigit() else (1, 0, label)


def main(options: Options) -> int:
    """Searches, writes each distinct failure's case, prints the summary; 1 if any failed."""
    from matrix.installed import installed_vllm_version

    results = search(options)
    findings, tightness = merged(results)
    scenarios = sum(r.scenarios for r in results)
    seconds = max(r.seconds for r in results)
    provenance = (
        f"Found by python -m matrix explore --seed {options.seed} "
        f"on vLLM {installed_vllm_version()}"
    )
    print(file=sys.stderr)
    for found in findings:
        path = write_case(found, options.out, provenance)
        print(f"{path}: {found.kind}: {found.detail}")
    rate = scenarios / seconds if seconds else 0.0
    print(
        f"explored {scenarios} scenarios in {seconds:.1f} s ({options.jobs} job(s)): "
        f"{rate:.0f} scenarios/s, {rate / options.jobs:.0f} per job; "
        f"distinct failures: {len(findings)}"
    )
    severities = Counter(found.severity or found.kind for found in findings)
    print(
        "findings by severity: "
        + (", ".join(f"{s} {n}" for s, n in sorted(severities.items())) or "none")
    )
    if options.escalate is not None:
        verdict = (
            f"escalates: {len(findings)} deadlock case file(s) written"
            if findings
            else (f"does not escalate in {scenarios} scenarios")
        )
        print(f"{options.escalate}: {verdict}")
    for variant, counts in sorted(tightness.items()):
        spread = ", ".join(
            f"{label} x{counts[label]}" for label in sorted(counts, key=_label_order)
        )
        print(f"over-reservation in blocks, {variant}: {spread}")
    return 1 if findings else 0
