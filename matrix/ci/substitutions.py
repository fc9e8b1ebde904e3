"""What ``python -m matrix.ci.play`` is asked to change of the workflow, and nothing else: the
runs of the matrix it keeps (``--release``, ``--shards``), the ``run:`` scripts' tox commands
(``--``'s arguments added; with ``--here`` an env's commands from tox.ini, and no tox install)
and a step's environment (``--inherit``). The list is ``play``'s docstring.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matrix.ci import steps
from matrix.ci.fork import FORKED
from matrix.ci.tox_commands import MATRIX, ToxEnv, read_env
from matrix.ci.workflow import JobRun, WorkflowError

TOX_RUN = re.compile(r"python -m tox -e ([\w.-]+)(?: -- ([^|&;\n]*))?")
MAY_BE_EMPTY = "--matrix-may-be-empty"  # the plugin's option: no cells here is an empty run
TOX_INSTALL = re.compile(r"^\s*python -m pip install\b.*\btox==.*$", re.MULTILINE)


@dataclass(frozen=True)
class Options:
    """What to play, where, and the substitutions asked for."""

    workflow: Path
    repo: Path
    out: Path
    releases: tuple[str, ...] = ()
    shards: int | None = None
    jobs: tuple[str, ...] = ()  # only these jobs (their needs among them); empty: every job
    here: bool = False
    fresh: bool = False  # with here: a new interpreter per python -m matrix run, not a fork
    pytest_args: tuple[str, ...] = ()
    inherit: tuple[str, ...] = ()
    verbose: bool = False


def selected(run: JobRun, options: Options) -> bool:
    """Whether ``--release`` and ``--shards`` keep this run of a job's matrix."""
    release, shard = run.matrix.get("release"), run.matrix.get("shard")
    if options.releases and release is not None and str(release) not in options.releases:
        return False
    return not (options.shards and shard is not None and int(shard) > options.shards)


def environment(
    step_env: dict[str, str], place: steps.StepPlace, inherit: Sequence[str], here: bool
) -> dict[str, str]:
    """The machine's environment, the workflow's on top (but the inherited names), then the
    runner's own variables."""
    variables = dict(os.environ)
    variables.update({k: v for k, v in step_env.items() if k not in inherit})
    variables.update(place.runner_variables())
    if here:  # `python` is this environment's, as in an activated virtual environment
        variables["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), variables["PATH"]])
    return variables


def substitute(script: str, options: Options) -> str:
    """A ``run:`` script with the substitutions the options ask for (``play``'s docstring)."""
    tox_ini = options.repo / "tox.ini"

    def tox_run(match: re.Match[str]) -> str:
        env = read_env(tox_ini, match.group(1))
        extra = added(env, options)
        given = match.group(2) or ""
        args, trail = given.rstrip(), given[len(given.rstrip()) :]
        if not options.here:
            if not extra:
                return match.group(0)
            words = " ".join([args, *map(shlex.quote, extra)]).strip()
            return f"python -m tox -e {env.name} -- {words}{trail}"
        _check_release(env.name, env.release)
        return env.shell(args or None, extra, MATRIX if options.fresh else FORKED) + trail

    if options.here:
        script = TOX_INSTALL.sub(": tox is not needed with --here", script)
    return TOX_RUN.sub(tox_run, script)


def added(env: ToxEnv, options: Options) -> tuple[str, ...]:
    """What the command line adds to an env's arguments: to a run of cells, ``--``'s arguments
    and that its suite may hold none of their cells (a filter for one suite is given to every
    suite's run: an empty one is an empty run, while the merge still fails when every shard is
    empty); to the cross-version table, the releases ``--release`` keeps (one release owes no
    check across releases, as it does in CI)."""
    if env.runs_cells and options.pytest_args:
        return (*options.pytest_args, MAY_BE_EMPTY)
    if env.crosses_releases and options.releases:
        return tuple(word for release in options.releases for word in ("--release", release))
    return ()


def _check_release(env: str, release: str | None) -> None:
    """Refuses (``--here``) an env that pins a vLLM release other than the installed one."""
    from matrix.installed import installed_vllm_version

    installed = installed_vllm_version()
    if release is not None and installed != release:
        hint = f": add --release {installed}" if installed else ""
        raise WorkflowError(
            f"--here: tox env {env} installs vLLM {release}, this environment has "
            f"{installed or 'no vLLM'}{hint}"
        )
