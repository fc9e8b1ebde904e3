"""No process outlives the one that started it (matrix/lifeline.py): a parent killed by a SIGTERM
or a SIGKILL leaves none of its forked children, nor a step's whole process group, running;
and ``python -m matrix run`` and the CI player, killed while their workers run, leave nothing
behind (the process tree is read from /proc before the kill, each process looked for after)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import REPO, needs_vllm

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").is_file(), reason="reads the process tree from /proc (Linux)"
)
GONE_WITHIN = 15.0  # seconds for the killed tree to end (a loaded 2-core machine)


def parents() -> dict[int, int]:
    """Every process's parent, from /proc."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            found[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    return found


def descendants(root: int) -> set[int]:
    """The processes below ``root``, now."""
    below: dict[int, list[int]] = {}
    for pid, parent in parents().items():
        below.setdefault(parent, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in below.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has ended: only its exit status is left to reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def wait_until(condition: Callable[[], bool], seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def left_after_kill(process: subprocess.Popen[str], signum: int, tree: set[int]) -> set[int]:
    """Kills ``process`` with ``signum``; which of ``tree`` still run after GONE_WITHIN."""
    process.send_signal(signum)
    process.wait(timeout=60)
    wait_until(lambda: not any(alive(pid) for pid in tree), GONE_WITHIN)
    left = {pid for pid in tree if alive(pid)}
    for pid in left:  # never leave them to the next test
        os.kill(pid, signal.SIGKILL)
    return left


# A parent forking two children that spin at full CPU, then waiting; it prints their pids.
FORKING_PARENT = textwrap.dedent(
    """\
    import sys, time
    from matrix.lifeline import Children
    children = Children()
    with children.watching():
        for _ in range(2):
            if children.fork() == 0:
                while True:
                    pass
        print(" ".join(map(str, sorted(children.pids))), flush=True)
        time.sleep(600)
    """
)
# A parent running a shell under a lifeline, the shell starting two sleeps of its own.
STEP_PARENT = textwrap.dedent(
    """\
    import subprocess, time
    from matrix.lifeline import lifeline_command
    shell = ["bash", "-c", "sleep 600 & sleep 600 & wait"]
    subprocess.Popen(lifeline_command(shell), start_new_session=True)
    print("started", flush=True)
    time.sleep(600)
    """
)


def started(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True
    )


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_forked_children_die_with_their_parent(signum: int) -> None:
    parent = started(FORKING_PARENT)
    assert parent.stdout is not None
    pids = {int(pid) for pid in parent.stdout.readline().split()}
    assert len(pids) == 2 and all(alive(pid) for pid in pids)
    assert left_after_kill(parent, signum, pids) == set()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_lifelines_whole_group_dies_with_its_parent(signum: int) -> None:
    """The shell's own children too: the lifeline kills the group it leads."""
    parent = started(STEP_PARENT)
    assert parent.stdout is not None and parent.stdout.readline() == "started\n"
    # The lifeline, the shell and its two sleeps.
    assert wait_until(lambda: len(descendants(parent.pid)) >= 4, 10), descendants(parent.pid)
    tree = descendants(parent.pid)
    assert left_after_kill(parent, signum, tree) == set()


def test_a_lifeline_gives_its_commands_exit_status(tmp_path: Path) -> None:
    from matrix.lifeline import lifeline_command

    done = subprocess.run(lifeline_command(["bash", "-c", "exit 7"]), check=False)
    assert done.returncode == 7
    killed = subprocess.run(lifeline_command(["bash", "-c", "kill -9 $$"]), check=False)
    assert killed.returncode == 128 + signal.SIGKILL


def test_a_child_whose_parent_already_died_ends_at_once() -> None:
    """The request comes too late for a parent that died first: the child sees another
    parent and leaves."""
    code = textwrap.dedent(
        """\
        import os, sys
        from matrix.lifeline import die_with_parent
        die_with_parent(os.getppid() + 1000000)
        print("still running", flush=True)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 1 and done.stdout == ""


# A variant whose rule never returns: a worker running one of its cells spins at full CPU
# until killed, as a worker in a long cell would (it writes no progress to find its parent
# gone by).
SPINNING_VARIANT = """\
class Spin:
    name = "spin"

    def apply(self, handle):
        while True:
            pass


SPIN = Spin()
"""
SPUN = ("cases/single_group.yaml", "cases/mamba_align.yaml", "-m", "spin", "-n", "2")


def cpu_seconds(pid: int) -> float:
    """The CPU time ``pid`` has used (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spinning(tree: set[int]) -> bool:
    """Two processes of the tree spin in the variant's rule (a second of CPU each, at least,
    after the import they share)."""
    family = parents()
    below: dict[int, int] = {}
    for pid in tree:
        below[family.get(pid, 0)] = below.get(family.get(pid, 0), 0) + 1
    leaves = [pid for pid in tree if pid not in below]
    return sum(cpu_seconds(pid) > 1.0 for pid in leaves) >= 2


def killed_when_spinning(command: list[str], cwd: Path, signum: int) -> set[int]:
    """Starts ``command``; once two of its workers spin, kills it with ``signum``; which of
    its process tree still runs after."""
    process = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True
    )
    try:
        if not wait_until(lambda: spinning(descendants(process.pid)), 300):
            pytest.fail(f"{command}: its workers never started")
        return left_after_kill(process, signum, descendants(process.pid))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@needs_vllm
@pytest.mark.slow
@pytest.mark.once
@pytest.mark.parametrize(
    ("command", "signum"),
    [("run", signal.SIGTERM), ("run", signal.SIGKILL), ("connectors", signal.SIGKILL)],
    ids=["run-SIGTERM", "run-SIGKILL", "connectors-SIGKILL"],
)
def test_a_killed_run_leaves_no_worker(command: str, signum: int, tmp_path: Path) -> None:
    """``python -m matrix run`` (or ``connectors``, the same runner over its suite) killed
    while its two forked workers run cells: neither goes on."""
    (tmp_path / "spin.py").write_text(SPINNING_VARIANT, encoding="utf-8")
    argv = [sys.executable, "-m", "matrix", command, "--", *(str(REPO / p) for p in SPUN[:2])]
    argv += [*SPUN[2:], f"--matrix-variant={tmp_path / 'spin.py'}:SPIN", "-p", "no:cacheprovider"]
    assert killed_when_spinning(argv, tmp_path, signum) == set()


@needs_vllm
@pytest.mark.slow
@pytest.mark.once
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_killed_play_leaves_no_process(signum: int, tmp_path: Path) -> None:
    """The CI player (``--here``) killed while a step's ``python -m matrix run``, forked from
    its fork server, runs two workers: the step's shell, the client, the server, the job and
    its workers all end."""
    from matrix.installed import installed_vllm_version
    from matrix.releases import RELEASES

    version = str(installed_vllm_version())
    env = next(f"vllm{r.replace('.', '')}" for r in RELEASES if version.startswith(f"{r}."))
    (tmp_path / "spin.py").write_text(SPINNING_VARIANT, encoding="utf-8")
    spun = " ".join([*SPUN, f"--matrix-variant={tmp_path / 'spin.py'}:SPIN"])
    workflow = tmp_path / "workflow.yml"
    workflow.write_text(
        "on: push\njobs:\n  cells:\n    runs-on: ubuntu-latest\n    steps:\n"
        f"      - run: python -m tox -e {env} -- {spun} -p no:cacheprovider\n",
        encoding="utf-8",
    )
    argv = [sys.executable, "-m", "matrix.ci.play", str(workflow), "--here", "--repo", str(REPO)]
    argv += ["--out", str(tmp_path / "out")]
    assert killed_when_spinning(argv, tmp_path, signum) == set()
