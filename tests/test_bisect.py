"""``python -m matrix bisect``: choosing the cells, what counts as the same verdict, a commit
that cannot run the case (skipped, its child ended), the user's checkout left as it was; and
the acceptance test: on a history of the four releases' Python trees (one commit each, from
their source archives), bisect finds where finding 4's RuntimeError first appears (0.31.0) and
where 0.31's two-load deadlock is gone (0.32.0)."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from matrix.__main__ import main
from matrix.releases import RELEASES as KNOWN
from matrix.releases import release_key
from matrix.tools.bisect import driver, step
from matrix.tools.bisect.step import Judged, Request, judge_commit, mark_of
from matrix.tools.bisect.verdict import CellVerdict, SelectionError, describe, same, select_cells
from tests.helpers import CASES, REPO, needs_vllm

FINDING_4 = REPO / "docs" / "findings" / "failed_load_full_groups.yaml"
# Every known release as a history, oldest first; the bisections below run over all of it.
RELEASES = tuple(f"{release}.0" for release in sorted(KNOWN, key=release_key))
NEWEST = f"v{RELEASES[-1]}"


def git(path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return done.stdout.strip()


def commit_tree(repo: Path, files: dict[str, str], tag: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", tag)
    git(repo, "tag", tag)
    return git(repo, "rev-parse", "HEAD")


def checkout_state(repo: Path) -> tuple[str, ...]:
    """What the user sees of a checkout: HEAD, status, refs (a bisect's among them), worktrees."""
    return (
        git(repo, "rev-parse", "HEAD"),
        git(repo, "status", "--porcelain"),
        git(repo, "for-each-ref"),
        git(repo, "worktree", "list", "--porcelain"),
    )


def options(case: Path | str, old: str, new: str, source: Path, **more: Any) -> list[str]:
    extra = [arg for key, value in more.items() for arg in (f"--{key}", str(value))]
    return ["bisect", str(case), old, new, "--source", str(source), *extra]


# --- what is compared ------------------------------------------------------------------------


def test_the_cells_are_a_variant_s_or_those_named() -> None:
    stock = select_cells(FINDING_4, "stock")
    assert [c.test_id for c in stock] == [
        "finding_failed_load_full_groups[policy=recompute]-stock",
        "finding_failed_load_full_groups[policy=fail]-stock",
    ]
    named = select_cells(CASES / "two_inflight_loads.yaml", "stock", ["two_inflight_loads-fixed"])
    assert [c.test_id for c in named] == ["two_inflight_loads-fixed"]
    with pytest.raises(SelectionError, match=r"no cell nope; its cells: two_inflight_loads-stock"):
        select_cells(CASES / "two_inflight_loads.yaml", "stock", ["nope"])
    with pytest.raises(SelectionError, match=r"no fixed cell; its variants: stock"):
        select_cells(FINDING_4, "fixed")


def verdict(observed: str, kind: str, pools: tuple[int, ...] = (), detail: str = "") -> CellVerdict:
    return CellVerdict("c-stock", observed, kind, pools, detail)


def test_the_same_verdict_is_the_same_outcome_kind_and_failing_pools() -> None:
    stall = verdict("fail", "stall", (17, 18), "pool 17: head ...")
    assert same((stall,), (verdict("fail", "stall", (17, 18), "other words, same verdict"),))
    assert not same((stall,), (verdict("fail", "stall", (18,)),))
    assert not same((stall,), (verdict("fail", "not_admitted", (17, 18)),))
    assert not same((stall,), (verdict("pass", "finished"),))
    assert describe((stall,)) == "stall at pools 17-18"
    assert describe((verdict("pass", "finished"), verdict("pass", "finished"))) == (
        "pass (all 2 cells)"
    )


def test_a_skipped_or_timed_out_cell_skips_the_commit() -> None:
    old = (verdict("pass", "finished"),)

    def judged(*cells: CellVerdict) -> Judged:
        problem = next(filter(None, (c.no_verdict() for c in cells)), None)
        return Judged("abc", "0.31.0", cells, problem, 1.0)

    assert mark_of(judged(verdict("pass", "finished")), old) == "same"
    assert mark_of(judged(verdict("fail", "error", (20,))), old) == "changed"
    skipped = judged(verdict("skip", "skipped", detail="vLLM 0.29.0 lacks ..."))
    assert mark_of(skipped, old) == "skip" and "lacks" in (skipped.problem or "")
    # A wall-clock limit depends on the machine's load, never on the commit.
    assert mark_of(judged(verdict("fail", "timeout", (9,))), old) == "skip"


# --- one commit, and the user's checkout ------------------------------------------------------


@pytest.fixture
def broken_history(tmp_path: Path) -> Path:
    """Three commits whose vLLM cannot be imported: the first two raise, the third hangs,
    with a process of its own that hangs too."""
    repo = tmp_path / "vllm-clone"
    repo.mkdir()
    git(repo, "init", "-q")
    commit_tree(repo, {"vllm/__init__.py": "raise ImportError('no torch here')\n"}, "v0.31.0")
    commit_tree(repo, {"vllm/__init__.py": "raise ImportError('no triton')\n"}, "v0.32.0")
    commit_tree(repo, {"vllm/__init__.py": HANGS}, "v0.33.0")
    return repo


HANGS = """\
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", *sys.argv[1:]])
time.sleep(600)
"""


def processes(*markers: str) -> list[int]:
    """The live processes whose command line names every one of ``markers``, now."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            alive = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            line = (proc / "cmdline").read_text() if proc.name.isdigit() and alive else ""
            if line and all(marker in line for marker in markers):
                found.append(int(proc.name))
        except (OSError, IndexError):  # not a process, or ended meanwhile
            continue
    return found


CASE_PROCESS = "matrix.tools.bisect.verdict"  # the module a commit's case runs in


def running(marker: str) -> list[int]:
    """The live processes whose command line names ``marker``, once those killed are gone:
    SIGKILL ends a process soon, not at once."""
    for _ in range(100):
        found = processes(marker)
        if not found:
            break
        time.sleep(0.1)
    return found


def request(tmp_path: Path, timeout: float = 300) -> Request:
    cells = ("finding_failed_load_full_groups[policy=fail]-stock",)
    return Request(str(FINDING_4), "stock", cells, timeout, str(tmp_path / "cache"))


def test_a_commit_that_cannot_run_the_case_has_no_verdict(
    broken_history: Path, tmp_path: Path
) -> None:
    git(broken_history, "checkout", "-q", "v0.31.0")
    judged = judge_commit(broken_history, request(tmp_path), tmp_path / "scratch")
    assert judged.version == "0.31.0"
    assert [v.observed for v in judged.verdicts] == ["skip"]
    assert judged.problem == (
        "finding_failed_load_full_groups[policy=fail]-stock skipped: "
        "vLLM lacks an import the adapters need: no torch here"
    )
    assert mark_of(judged, ()) == "skip"


def test_a_commit_past_the_step_timeout_is_ended_and_skipped(
    broken_history: Path, tmp_path: Path
) -> None:
    git(broken_history, "checkout", "-q", "v0.33.0")
    scratch = tmp_path / "scratch"
    judged = judge_commit(broken_history, request(tmp_path, timeout=1), scratch)
    assert judged.problem == "the case ran past 1 s (--step-timeout)"
    # The child and what it started (its arguments name the scratch folder) are all ended.
    assert running(str(scratch)) == []


def test_a_ref_without_a_verdict_stops_in_one_line_and_leaves_the_checkout_as_it_was(
    broken_history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = checkout_state(broken_history)
    assert main(options(FINDING_4, "v0.31.0", "v0.32.0", broken_history)) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("matrix bisect: the old ref ") and "no torch here" in error
    assert "\n" not in error
    assert checkout_state(broken_history) == before


def test_an_interrupted_bisect_leaves_the_checkout_as_it_was(
    broken_history: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = checkout_state(broken_history)

    def interrupted(*args: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(driver, "judge_commits", interrupted)
    assert main(options(FINDING_4, "v0.31.0", "v0.32.0", broken_history)) == 130
    assert "the checkout is as it was" in capsys.readouterr().err
    assert checkout_state(broken_history) == before


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_the_command_its_steps_and_its_worktrees(
    broken_history: Path, tmp_path: Path, signum: int
) -> None:
    """Ctrl-C (or SIGTERM) while a commit's case runs: the case's processes are ended, the
    scratch worktrees removed, the checkout as it was."""
    before = checkout_state(broken_history)
    temporary = tmp_path / "tmp"  # the scratch folders go here; the case's arguments name it
    temporary.mkdir()
    command = [sys.executable, "-m", "matrix"]
    command += options(FINDING_4, "v0.31.0", "v0.33.0", broken_history)
    env = {**os.environ, "TMPDIR": str(temporary)}
    # Ctrl-C as a terminal delivers it, whatever this process's parent (an xdist worker
    # ignores SIGINT, and a child inherits that, so Python would install no handler for it).
    default_sigint = functools.partial(signal.signal, signal.SIGINT, signal.SIG_DFL)
    with subprocess.Popen(
        command, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint
    ) as bisect:
        # Until a commit's case runs (a bound, not a timing); not merely a process in the
        # scratch folder, such as git adding a worktree, whose own children outlive a kill.
        for _ in range(1200):
            if processes(str(temporary), CASE_PROCESS) or bisect.poll() is not None:
                break
            time.sleep(0.1)
        assert bisect.poll() is None, "the command ended before its case ran"
        bisect.send_signal(signum)
        try:
            _, error = bisect.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            bisect.kill()  # never leave the suite waiting on it
            raise
    assert bisect.returncode == 130, error
    assert "interrupted; the checkout is as it was" in error
    assert running(str(temporary)) == []
    assert list(temporary.iterdir()) == []
    assert checkout_state(broken_history) == before


@pytest.mark.parametrize(
    ("case", "old", "new", "message"),
    [
        ("no_such_case", "v0.31.0", "v0.32.0", "no_such_case: no such case file, shipped case"),
        ("failed_load_full_groups", "v0.29.0", "v0.32.0", "no commit v0.29.0"),
    ],
)
def test_bad_arguments_are_one_line(
    broken_history: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
    old: str,
    new: str,
    message: str,
) -> None:
    assert main(options(case, old, new, broken_history)) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1


def test_the_source_must_be_a_git_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(options("two_inflight_loads", "a", "b", tmp_path)) == 2
    assert f"{tmp_path}: not a git checkout" in capsys.readouterr().err


def test_the_command_line_knows_findings_by_name() -> None:
    assert driver.case_path("failed_load_full_groups") == FINDING_4
    assert driver.case_path("two_inflight_loads") == CASES / "two_inflight_loads.yaml"


def test_a_fault_in_the_step_stops_the_bisect_instead_of_marking_the_commit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python exits with 1 on an uncaught error, which git bisect run would read as "changed"."""
    previous = signal.getsignal(signal.SIGTERM)  # the step's own handler, undone
    try:
        assert step.main([str(tmp_path / "no-state")]) == step.ABORT > 127
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert "FileNotFoundError" in capsys.readouterr().err


def test_only_skipped_commits_left_are_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = "a" * 40, "b" * 40
    output = (
        "There are only 'skip'ped commits left to test.\n"
        f"The first changed commit could be any of:\n{first}\n{second}\n"
        "We cannot bisect more!\n"
    )
    assert driver.conclusion(tmp_path, output, []) == {
        "first_changed": None,
        "candidates": [first, second],
    }
    printed = capsys.readouterr().out
    assert "leave the first changed commit one of 2: aaaaaaaaaaaa bbbbbbbbbbbb" in printed


# --- acceptance: the releases as a history ----------------------------------------------------


@pytest.fixture(scope="module")
def release_history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git history of the releases' ``vllm/`` trees, one tagged commit each, as a clone has
    them (no generated ``vllm/_version.py``: the version comes from the tag). Committed
    straight from the shared unpacked archives (GIT_WORK_TREE), which are never changed."""
    from matrix.tools.devsource import SourceError
    from matrix.upstream.source import fetch_tree

    repo = tmp_path_factory.mktemp("releases")
    git(repo, "init", "-q")
    for version in RELEASES:
        try:
            tree = fetch_tree(version)
        except SourceError as error:
            pytest.skip(f"vLLM {version}'s source archive: {error}")
        env = {**os.environ, "GIT_WORK_TREE": str(tree)}
        git(repo, "add", "-A", "--", "vllm", ":!vllm/_version.py", env=env)
        git(repo, "commit", "-qm", f"vLLM {version}", env=env)
        git(repo, "tag", f"v{version}")
    return repo


def bisected(
    source: Path, case: Path | str, old: str, new: str, tmp_path: Path
) -> tuple[int, dict[str, Any]]:
    report = tmp_path / "bisect.json"
    code = main(options(case, old, new, source, json=report))
    result: dict[str, Any] = json.loads(report.read_text())
    return code, result


@needs_vllm
@pytest.mark.heavy
def test_bisect_finds_where_finding_4_s_runtime_error_first_appears(
    release_history: Path, tmp_path: Path
) -> None:
    before = checkout_state(release_history)
    code, result = bisected(release_history, "failed_load_full_groups", "v0.30.0", NEWEST, tmp_path)
    assert code == 0
    assert result["first_changed"]["commit"] == git(release_history, "rev-parse", "v0.31.0")
    assert result["first_changed"]["version"] == "0.31.0"
    assert {v["observed"] for v in result["old"]["verdicts"]} == {"pass"}
    for cell in result["first_changed"]["verdicts"]:
        assert (cell["kind"], cell["failing_pools"]) == ("error", [20])
        assert "RuntimeError: A KV connector reported block-level load failures" in cell["detail"]
    assert [step["version"] for step in result["steps"]] == ["0.32.0", "0.31.0"]
    assert checkout_state(release_history) == before


@needs_vllm
@pytest.mark.heavy
def test_bisect_finds_where_the_0_31_margin_deadlock_is_gone(
    release_history: Path, tmp_path: Path
) -> None:
    code, result = bisected(release_history, "two_inflight_loads", "v0.31.0", NEWEST, tmp_path)
    assert code == 0
    assert result["first_changed"]["version"] == "0.32.0"
    (stall,) = result["old"]["verdicts"]
    assert stall["kind"] == "stall" and {17, 18} <= set(stall["failing_pools"])
    assert [v["observed"] for v in result["first_changed"]["verdicts"]] == ["pass"]
