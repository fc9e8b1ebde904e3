"""A played job's steps (``play``): the tree a runner checks out, a ``run:``
script run as the runner runs it, and the actions a workflow ``uses`` emulated on this machine:
``checkout`` (the fresh workspace is the checkout), ``setup-python`` (this machine's Python
3, which it names), ``cache`` (skipped: uv's cache here is this machine's), ``upload-artifact``
and ``download-artifact`` (folders under ``OUT/artifacts``, with their ``path``, ``pattern``
and ``merge-multiple`` rules). Any other action is refused, never passed over.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from matrix.lifeline import lifeline_command

SHELLS = {  # GitHub's runners: `bash` when the step or the defaults name it, else `bash -e`
    None: ["bash", "-e"],
    "bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail"],
    "sh": ["sh", "-e"],
}
# The actions whose inputs the player reads (the others' are not evaluated: a cache key's
# hashFiles() is GitHub's alone).
READS_INPUTS = ("actions/setup-python", "actions/upload-artifact", "actions/download-artifact")
LOG_TAIL = 40  # lines of a failed step's output shown


class StepError(Exception):
    """A step the player cannot play here; the message is one line."""


class ActionFailed(Exception):
    """An emulated action failed, as it would on GitHub (the step fails, the play goes on)."""


@dataclass(frozen=True)
class StepOutcome:
    """How a step ended (success, failure or skipped), in how long, and what it did."""

    name: str
    status: str
    seconds: float = 0.0
    detail: str = ""

    def line(self) -> str:
        """One line for the play's report."""
        mark = {"success": "ok", "failure": "FAILED", "skipped": "skipped"}[self.status]
        timing = f" ({self.seconds:.1f} s)" if self.status != "skipped" else ""
        return f"{mark:7} {self.name}{timing}{': ' + self.detail if self.detail else ''}"


@dataclass(frozen=True)
class StepPlace:
    """Where a ``run:`` step runs: the job's workspace and folder, its number in the job."""

    workspace: Path
    home: Path
    number: int
    working_directory: str | None = None

    @property
    def summary(self) -> Path:
        """The step's own ``$GITHUB_STEP_SUMMARY`` (GitHub gives each step one)."""
        return self.home / "summary" / f"step-{self.number:02d}.md"

    def runner_variables(self) -> dict[str, str]:
        """The variables a runner sets for a step (their files made)."""
        for folder in (self.home / "summary", self.home / "tmp", self.home / "files"):
            folder.mkdir(parents=True, exist_ok=True)
        files = {
            name: self.home / "files" / f"{name.lower()}-{self.number:02d}"
            for name in ("GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH")
        }
        for path in [self.summary, *files.values()]:
            path.touch()
        return {
            "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_STEP_SUMMARY": str(self.summary),
            "RUNNER_TEMP": str(self.home / "tmp"),
            "RUNNER_OS": "Linux",
            **{name: str(path) for name, path in files.items()},
        }


def repository_of(path: Path) -> Path:
    """The git work tree holding ``path``."""
    found = subprocess.run(
        ["git", "-C", str(path.resolve().parent), "rev-parse", "--show-toplevel"],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode:
        raise StepError(f"{path}: not in a git work tree (name one with --repo)")
    return Path(found.stdout.strip())


def snapshot(repo: Path, folder: Path) -> Path:
    """A copy of the repository's files (tracked, and untracked ones git does not ignore): the
    tree a runner's checkout gives, with this work tree's changes."""
    listed = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    )
    for name in sorted(set(listed.stdout.decode().split("\0")) - {""}):
        source = repo / name
        if source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    return folder


def fresh_workspace(checkout: Path, workspace: Path) -> Path:
    """A job's own copy of the play's checkout."""
    shutil.copytree(checkout, workspace)
    return workspace


def run_script(
    name: str,
    script: str,
    shell: str | None,
    variables: Mapping[str, str],
    place: StepPlace,
    seconds: float,
    verbose: bool,
) -> StepOutcome:
    """Runs a ``run:`` script as the runner does, in the workspace, within ``seconds``."""
    if shell not in SHELLS:
        raise StepError(f"step {name}: cannot play the shell {shell!r}")
    path = place.home / "scripts" / f"step-{place.number:02d}.sh"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script, encoding="utf-8")
    log = place.home / "logs" / f"step-{place.number:02d}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    with log.open("w", encoding="utf-8") as output:
        process = subprocess.Popen(
            # Under a lifeline: the step's whole group ends when the player does, however.
            lifeline_command([*SHELLS[shell], str(path)]),
            cwd=place.workspace / (place.working_directory or "."),
            env=dict(variables),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group: a timeout ends the whole step
        )
        pump = threading.Thread(target=_copy_lines, args=(process, output, verbose), daemon=True)
        pump.start()
        try:
            code = process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            _end_group(process)
            pump.join(5)
            return StepOutcome(
                name, "failure", time.monotonic() - began, f"ran past {seconds:.0f} s"
            )
        except BaseException:  # Ctrl-C, a SIGTERM (lifeline.ending_as_interrupts)
            _end_group(process)
            raise
        pump.join()
    took = time.monotonic() - began
    if code == 0:
        return StepOutcome(name, "success", took)
    tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_TAIL:]
    if not verbose:
        print("\n".join(f"    | {line}" for line in tail))
    return StepOutcome(name, "failure", took, f"exit {code}, output in {log}")


def _end_group(process: subprocess.Popen[str]) -> None:
    """Kills the step's process group (``start_new_session``: the step and what it started)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _copy_lines(process: subprocess.Popen[str], log: TextIO, verbose: bool) -> None:
    """The step's output into its log, and to the terminal with ``--verbose``."""
    assert process.stdout is not None
    for text in process.stdout:
        log.write(text)
        if verbose:
            sys.stdout.write(f"    | {text}")
            sys.stdout.flush()


def emulate(
    name: str, uses: str, inputs: Mapping[str, str], workspace: Path, out: Path
) -> StepOutcome:
    """A ``uses:`` step done here, as the module's docstring says."""
    action = uses.split("@")[0]
    began = time.monotonic()
    if action == "actions/checkout":
        detail = "the job's workspace is a fresh copy of the repository"
    elif action == "actions/setup-python":
        here = "{}.{}".format(*sys.version_info[:2])
        detail = f"this machine's Python {here} stands for {inputs.get('python-version', '')}"
    elif action == "actions/cache":
        detail = "skipped: this machine's caches are used"
    elif action not in ("actions/upload-artifact", "actions/download-artifact"):
        raise StepError(f"step {name}: cannot play the action {uses}")
    else:
        transfer = _upload if action == "actions/upload-artifact" else _download
        try:
            detail = transfer(inputs, workspace, out / "artifacts")
        except ActionFailed as error:
            return StepOutcome(name, "failure", time.monotonic() - began, str(error))
    return StepOutcome(name, "success", time.monotonic() - began, detail)


def _upload(inputs: Mapping[str, str], workspace: Path, artifacts: Path) -> str:
    """upload-artifact: the files ``path`` names, stored under their least common ancestor."""
    name = inputs.get("name", "artifact")
    target = artifacts / name
    if target.exists():
        raise ActionFailed(f"upload-artifact: an artifact named {name} was already uploaded")
    roots, files = [], []
    for entry in inputs.get("path", "").splitlines():
        entry = entry.strip()
        if entry.startswith("!"):
            raise StepError(f"upload-artifact: cannot play the exclusion {entry}")
        for match in sorted(workspace.glob(entry)) if entry else []:
            if match.is_dir():
                roots.append(match)
                files += [p for p in sorted(match.rglob("*")) if p.is_file()]
            else:
                roots.append(match.parent)
                files.append(match)
    if not files:
        if inputs.get("if-no-files-found", "warn") == "error":
            raise ActionFailed(f"upload-artifact {name}: no files found at {inputs.get('path')!r}")
        return f"artifact {name}: no files found"
    root = Path(os.path.commonpath(roots))
    for file in files:
        (target / file.relative_to(root)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, target / file.relative_to(root))
    return f"artifact {name}: {len(files)} files"


def _download(inputs: Mapping[str, str], workspace: Path, artifacts: Path) -> str:
    """download-artifact: ``name`` (into ``path``), or every artifact ``pattern`` matches,
    each into ``path/NAME`` or, with ``merge-multiple`` (or only one), all into ``path``."""
    present = sorted(p.name for p in artifacts.iterdir()) if artifacts.is_dir() else []
    wanted = inputs.get("name")
    chosen = [wanted] if wanted else fnmatch.filter(present, inputs.get("pattern") or "*")
    if wanted and wanted not in present:
        raise ActionFailed(f"download-artifact: no artifact named {wanted}")
    destination = workspace / inputs.get("path", ".")
    merged = inputs.get("merge-multiple", "false").lower() == "true" or len(chosen) == 1
    for name in chosen:
        shutil.copytree(
            artifacts / name, destination if merged else destination / name, dirs_exist_ok=True
        )
    return f"{len(chosen)} artifacts into {inputs.get('path', '.')}"


def gather_summaries(home: Path, summaries: Path, name: str) -> str | None:
    """The job's summary (its steps' in order) written to ``summaries/NAME.md``, or None."""
    parts = sorted((home / "summary").glob("step-*.md")) if (home / "summary").is_dir() else []
    text = "".join(part.read_text(encoding="utf-8") for part in parts)
    if not text:
        return None
    summaries.mkdir(parents=True, exist_ok=True)
    (summaries / f"{name}.md").write_text(text, encoding="utf-8")
    return str(summaries / f"{name}.md")
