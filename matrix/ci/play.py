"""``python -m matrix.ci.play WORKFLOW``: a GitHub Actions workflow played on this
machine, so that the template in docs/ci/ is run, not only read (docs/ci.md).

Every job of the matrix runs in sequence, each in its own copy of the repository's files, taken
once when the play starts (what ``actions/checkout`` gives each runner of a run): its ``run:``
steps through bash as the runner runs them, its ``uses:`` steps emulated (``steps``):
artifacts are folders under ``OUT/artifacts``, ``$GITHUB_STEP_SUMMARY`` a file per step,
gathered per job in ``OUT/summaries``. Then the jobs that need them, the merge. It prints what
each job did and writes ``OUT/play.json``.

The steps run as written, with these substitutions only, each asked for on the command line:

- ``--release V`` and ``--shards N`` restrict the matrix (``release`` in V; ``shard`` 1 ... N,
  and the workflow's ``SHARDS`` set to N); the cross-version table is given the releases V
  (one release asked for owes no check across releases);
- arguments after ``--`` are added to every ``python -m tox -e ENV`` that runs cells (``run``,
  ``connectors``, ``sweep --cells``), with ``--matrix-may-be-empty`` (a suite holding none of a
  filter's cells is an empty run);
- ``--here`` runs each ``python -m tox -e ENV -- ARGS`` as ENV's commands from tox.ini in this
  environment (refused for an env pinning another vLLM release than the installed one), and
  skips ``python -m pip install ... tox==...`` (no tox is needed then); the player imports
  vLLM once and each ``python -m matrix`` command that imports it (``run``, ``connectors``,
  ``sweep``) is a fork of it (``fork``), or with ``--fresh`` a new interpreter, as on a
  machine of its own;
- ``--inherit NAME`` keeps this machine's ``NAME`` (or its absence) over the workflow's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import signal
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from matrix.ci import steps
from matrix.ci.fork import ForkError, ForkServer
from matrix.ci.substitutions import Options, environment, selected, substitute
from matrix.ci.tox_commands import ToxError
from matrix.ci.workflow import (
    JobRun,
    Status,
    WorkflowError,
    condition,
    interpolate,
    job_order,
    job_runs,
    load_workflow,
    needs_of,
)
from matrix.lifeline import Terminated, ending_as_interrupts, exit_status


@dataclass
class JobOutcome:
    """What a job did: its steps' outcomes, artifacts, and its summary file."""

    job: str
    name: str
    matrix: dict[str, Any]
    status: str = "success"
    steps: list[steps.StepOutcome] = field(default_factory=list)
    summary: str | None = None


def play(options: Options) -> list[JobOutcome]:
    """Plays the workflow's jobs in order; their outcomes (raises WorkflowError, ToxError)."""
    workflow = load_workflow(options.workflow)
    # Every job's runs before anything runs: a matrix that cannot be played stops the play
    # before the checkout is copied and the first job starts.
    chosen = {
        job_id: _runs(workflow, job_id, options) for job_id in chosen_jobs(workflow, options.jobs)
    }
    env = {str(k): str(v) for k, v in (workflow.get("env") or {}).items()}
    if options.shards is not None:
        env["SHARDS"] = str(options.shards)
    # One checkout for every job, as every job of a run checks out one commit: edits to the
    # work tree while the play runs cannot give two shards different code.
    checkout = steps.snapshot(options.repo, options.out / "checkout")
    outcomes: list[JobOutcome] = []
    succeeded: dict[str, bool] = {}  # job id -> every run of it succeeded
    with _forks(options) as server:
        if server is not None:  # how each step's python -m matrix.ci.fork finds it
            env.update(server.variables)
        for job_id, runs in chosen.items():
            needed = needs_of(workflow["jobs"][job_id])
            status = Status(failed=not all(succeeded[n] for n in needed))
            for run in runs:
                home = options.out / "jobs" / f"{len(outcomes) + 1:02d}-{_slug(run.name)}"
                outcomes.append(_play_job(run, workflow, env, status, home, checkout, options))
            succeeded[job_id] = all(o.status == "success" for o in outcomes if o.job == job_id)
    return outcomes


def _runs(workflow: dict[str, Any], job_id: str, options: Options) -> list[JobRun]:
    """The runs of a job the options select (:class:`WorkflowError` when its matrix cannot be
    played, or they select none)."""
    try:
        runs = [r for r in job_runs(workflow, job_id) if selected(r, options)]
    except WorkflowError as error:  # its strategy.matrix
        raise WorkflowError(f"{options.workflow}: job {job_id}: {error}") from None
    if not runs:
        raise WorkflowError(f"job {job_id}: --release/--shards leave none of its runs")
    return runs


def _forks(options: Options) -> contextlib.AbstractContextManager[ForkServer | None]:
    """The server the ``python -m matrix run`` of ``--here`` forks from, vLLM and pytest's
    plugins imported first (none with ``--fresh``, or without ``--here``)."""
    if not options.here or options.fresh:
        return contextlib.nullcontext()
    from matrix.installed import installed_vllm_version
    from matrix.runner.forked import import_pytest_plugins, import_vllm_once

    if installed_vllm_version() is not None:
        print(f"play: vLLM imported in {import_vllm_once():.1f} s, once for every job", flush=True)
    import_pytest_plugins(leave="matrix")  # the job imports its checkout's own
    return ForkServer()


def chosen_jobs(workflow: dict[str, Any], chosen: tuple[str, ...]) -> list[str]:
    """The jobs to play, in order: ``chosen`` (every job when empty), each with its needs."""
    order = job_order(workflow)
    for job_id in chosen:
        if job_id not in order:
            raise WorkflowError(f"--job {job_id}: the workflow has no such job")
        missing = [n for n in needs_of(workflow["jobs"][job_id]) if n not in chosen]
        if missing:
            raise WorkflowError(f"--job {job_id} needs {missing[0]}: name it too")
    return [job_id for job_id in order if not chosen or job_id in chosen]


@dataclass(frozen=True)
class _Job:
    """A job run's place: its folder, workspace, default shell and time limit."""

    home: Path
    workspace: Path
    shell: str | None
    minutes: float


def _play_job(
    run: JobRun,
    workflow: dict[str, Any],
    env: dict[str, str],
    needed: Status,
    home: Path,
    checkout: Path,
    options: Options,
) -> JobOutcome:
    """One run of a job: its ``if``, then its steps in a fresh copy of ``checkout``."""
    outcome = JobOutcome(run.job_id, run.name, run.matrix)
    contexts = {"matrix": run.matrix, "runner": {"os": "Linux", "temp": str(home / "tmp")}}
    if not condition(run.definition.get("if"), {**contexts, "env": env}, needed):
        outcome.status = "skipped"
        print(f"play: job {run.name}: skipped (its if: does not hold)", flush=True)
        return outcome
    print(f"play: job {run.name}", flush=True)
    shell = ((workflow.get("defaults") or {}).get("run") or {}).get("shell")
    job = _Job(
        home,
        steps.fresh_workspace(checkout, home / "workspace"),
        ((run.definition.get("defaults") or {}).get("run") or {}).get("shell", shell),
        float(run.definition.get("timeout-minutes", 360)),
    )
    job_env = {**env, **_evaluated(run.definition.get("env"), {**contexts, "env": env})}
    for number, step in enumerate(run.definition.get("steps") or [], 1):
        step_env = {**job_env, **_evaluated(step.get("env"), {**contexts, "env": job_env})}
        failed = outcome.status == "failure"
        result = _play_step(job, number, step, {**contexts, "env": step_env}, failed, options)
        outcome.steps.append(result)
        print(f"  {result.line()}", flush=True)
        if result.status == "failure" and not step.get("continue-on-error"):
            outcome.status = "failure"
    outcome.summary = steps.gather_summaries(home, options.out / "summaries", home.name)
    return outcome


def _play_step(
    job: _Job,
    number: int,
    step: dict[str, Any],
    scope: dict[str, Any],
    failed: bool,
    options: Options,
) -> steps.StepOutcome:
    """One step: skipped by its ``if``, an emulated action, or its script run."""
    name = str(step.get("name") or step.get("uses") or f"Run {step.get('run', '').strip()}")
    name = interpolate(name, scope).splitlines()[0]
    if not condition(step.get("if"), scope, Status(failed)):
        return steps.StepOutcome(name, "skipped")
    if "uses" in step:
        reads = str(step["uses"]).split("@")[0] in steps.READS_INPUTS
        inputs = _evaluated(step.get("with"), scope) if reads else {}
        return steps.emulate(name, str(step["uses"]), inputs, job.workspace, options.out)
    place = steps.StepPlace(job.workspace, job.home, number, step.get("working-directory"))
    script = substitute(interpolate(str(step["run"]), scope), options)
    variables = environment(scope["env"], place, options.inherit, options.here)
    seconds = float(step.get("timeout-minutes", job.minutes)) * 60
    shell = step.get("shell", job.shell)
    return steps.run_script(name, script, shell, variables, place, seconds, options.verbose)


def _make_out(out: Path) -> None:
    """``--out``'s folder, made where it is not (:class:`steps.StepError` in one line where it
    cannot be: a file by that name, a folder not writable)."""
    if out.exists() and not out.is_dir():
        raise steps.StepError(f"--out {out}: not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise steps.StepError(f"--out {out}: {error.strerror or error}") from None


def _evaluated(mapping: Any, contexts: dict[str, Any]) -> dict[str, str]:
    return {str(k): interpolate(str(v), contexts) for k, v in (mapping or {}).items()}


def _slug(name: str) -> str:
    return re.sub(r"[^\w.-]+", "-", name).strip("-") or "job"


ARGUMENTS = (  # (flags, argparse keywords) of the command line
    (("workflow",), {"type": Path, "nargs": "?", "default": Path("docs/ci/github-workflow.yml")}),
    (("--release",), {"action": "append", "default": [], "help": "only this release's runs"}),
    (("--shards",), {"type": int, "help": "each release in shards 1 ... N"}),
    (("--job",), {"action": "append", "default": [], "help": "only this job (and others named)"}),
    (("--here",), {"action": "store_true", "help": "tox envs' commands in this environment"}),
    (("--fresh",), {"action": "store_true", "help": "with --here: no fork, an interpreter a job"}),
    (
        ("--inherit",),
        {"action": "append", "default": [], "metavar": "NAME", "help": "its value here"},
    ),
    (("--out",), {"type": Path, "help": "where the jobs' files go (default: a new folder)"}),
    (("--repo",), {"type": Path, "help": "the repository to copy (default: the workflow's)"}),
    (("--verbose",), {"action": "store_true", "help": "the steps' output as they run"}),
)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (arguments after ``--`` go to the runs of cells); 0 when every job
    succeeded, 1 when one failed, 2 when the workflow cannot be played."""
    parser = argparse.ArgumentParser(
        prog="python -m matrix.ci.play",
        description=__doc__.split("\n\n")[0],
        epilog="Arguments after -- are added to the runs of cells (-k, -n ...).",
    )
    for flags, keywords in ARGUMENTS:
        parser.add_argument(*flags, **keywords)
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    given, extra = parser.parse_args(argv[:cut]), tuple(argv[cut + 1 :])
    try:
        repo = (given.repo or steps.repository_of(given.workflow)).resolve()
        out = (given.out or Path(tempfile.mkdtemp(prefix="play-workflow-"))).resolve()
        _make_out(out)
        options = Options(given.workflow.absolute(), repo, out, tuple(given.release), given.shards)
        options = replace(options, jobs=tuple(given.job))
        options = replace(options, here=given.here, fresh=given.fresh, pytest_args=extra)
        with ending_as_interrupts():  # the step and the fork server end with the play
            outcomes = play(replace(options, inherit=tuple(given.inherit), verbose=given.verbose))
    except (WorkflowError, ToxError, steps.StepError, ForkError) as error:
        print(f"play: {error}", file=sys.stderr)
        return 2
    except Terminated as ended:
        print(f"play: ended by {ended}; its steps were killed", file=sys.stderr)
        return exit_status(ended.signum)
    except KeyboardInterrupt:
        print("play: interrupted; its steps were killed", file=sys.stderr)
        return exit_status(signal.SIGINT)
    report = json.dumps([asdict(o) for o in outcomes], indent=2)
    (out / "play.json").write_text(report + "\n", encoding="utf-8")
    failed = [o for o in outcomes if o.status == "failure"]
    print(f"\nplay: {len(outcomes)} jobs, {len(failed)} failed; their files are in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
