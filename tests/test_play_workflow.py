"""The workflow player's parts: GitHub's matrix expansion and expressions, tox envs' commands,
the ``--here`` substitutions, a job forked from the player, the emulated artifacts, and a
small workflow played end to end (no vLLM, no tox)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from matrix.ci import fork, play, steps, substitutions
from matrix.ci.tox_commands import ToxError, read_env
from matrix.ci.workflow import (
    Status,
    WorkflowError,
    condition,
    evaluate,
    expand_matrix,
    interpolate,
    job_order,
)
from matrix.installed import installed_vllm_version
from matrix.releases import RELEASES
from tests.helpers import REPO, needs_vllm

TOX_INI = REPO / "tox.ini"


def test_include_extends_the_original_combinations_or_adds_its_own() -> None:
    """GitHub's documented example of ``include``."""
    matrix = {
        "fruit": ["apple", "pear"],
        "animal": ["cat", "dog"],
        "include": [
            {"color": "green"},
            {"color": "pink", "animal": "cat"},
            {"fruit": "apple", "shape": "circle"},
            {"fruit": "banana"},
            {"fruit": "banana", "animal": "cat"},
        ],
    }
    assert expand_matrix(matrix) == [
        {"fruit": "apple", "animal": "cat", "color": "pink", "shape": "circle"},
        {"fruit": "apple", "animal": "dog", "color": "green", "shape": "circle"},
        {"fruit": "pear", "animal": "cat", "color": "pink"},
        {"fruit": "pear", "animal": "dog", "color": "green"},
        {"fruit": "banana"},
        {"fruit": "banana", "animal": "cat"},
    ]


def test_exclude_drops_the_combinations_it_matches() -> None:
    matrix = {"os": ["a", "b"], "n": [1, 2], "exclude": [{"os": "a", "n": 2}]}
    assert expand_matrix(matrix) == [{"os": "a", "n": 1}, {"os": "b", "n": 1}, {"os": "b", "n": 2}]


def test_expressions_as_github_evaluates_them() -> None:
    contexts: dict[str, Any] = {"matrix": {"shard": 2, "release": "0.33.0"}, "env": {"N": "3"}}
    assert interpolate("shard ${{ matrix.shard }} of ${{ env.N }}", contexts) == "shard 2 of 3"
    assert evaluate("matrix.shard == 2 && matrix.release != '0.30.0'", contexts) is True
    assert evaluate("matrix.missing || 'default'", contexts) == "default"
    assert evaluate("'Linux' == 'linux'", contexts) is True  # strings compare ignoring case
    failed, fine = Status(failed=True), Status()
    assert condition("${{ !cancelled() }}", contexts, failed)
    assert not condition(None, contexts, failed)  # an absent if: is success()
    assert not condition("matrix.shard == 2", contexts, failed)  # success() && (it)
    assert condition("matrix.shard == 2", contexts, fine)
    assert condition("failure()", contexts, failed)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("hashFiles('tox.ini')", "cannot play the function hashFiles()"),
        ("github.event.number", "cannot play the context 'github'"),
        ("matrix.shard ==", "cannot play the expression"),
    ],
)
def test_an_expression_the_player_does_not_know_is_refused(expression: str, message: str) -> None:
    with pytest.raises(WorkflowError, match=message) as refused:
        evaluate(expression, {"matrix": {}})
    assert "\n" not in str(refused.value)


def test_jobs_run_after_the_jobs_they_need() -> None:
    jobs = {"merge": {"needs": ["a", "b"]}, "b": {"needs": "a"}, "a": {}}
    assert job_order({"jobs": jobs}) == ["a", "b", "merge"]
    with pytest.raises(WorkflowError, match="cycle"):
        job_order({"jobs": {"a": {"needs": "b"}, "b": {"needs": "a"}}})


def test_job_plays_the_jobs_named_with_their_needs_or_refuses() -> None:
    workflow = {"jobs": {"shard": {}, "coverage": {}, "merge": {"needs": "shard"}}}
    assert play.chosen_jobs(workflow, ()) == ["shard", "coverage", "merge"]
    assert play.chosen_jobs(workflow, ("merge", "shard")) == ["shard", "merge"]
    with pytest.raises(WorkflowError, match="--job merge needs shard: name it too"):
        play.chosen_jobs(workflow, ("merge",))
    with pytest.raises(WorkflowError, match="no such job"):
        play.chosen_jobs(workflow, ("lint",))


def test_a_tox_env_s_commands_with_its_positional_arguments() -> None:
    shard = read_env(TOX_INI, "vllm033")
    assert shard.release == "0.33.0" and shard.runs_cells
    assert shard.shell('--splits "$SHARDS" --group 2', ("-k", "a b")) == (
        "python -m matrix run -- --splits \"$SHARDS\" --group 2 -k 'a b'"
    )
    merge = read_env(TOX_INI, "merge")
    assert merge.release is None and not merge.runs_cells
    assert merge.shell(None) == "python -m matrix merge reports/shards"
    # The suites run cells too; with --here each command importing vLLM is forked.
    assert read_env(TOX_INI, "connectors034").runs_cells
    sweep = read_env(TOX_INI, "sweep034")
    assert sweep.runs_cells and not sweep.crosses_releases
    assert sweep.shell(None, ("-k", "x"), "python -m matrix.ci.fork") == (
        "( python -m matrix.ci.fork sweep && python -m matrix.ci.fork sweep --cells -- -k x )"
    )
    cross = read_env(TOX_INI, "crossversion")
    assert cross.crosses_releases and not cross.runs_cells
    suite = read_env(TOX_INI, "ci034")
    run = 'run -- tests -m "not heavy" --durations-path tests/durations.json --cpu-log'
    assert suite.shell(None).startswith(f"( python -m matrix {run}")
    forked = suite.shell(None, (), "python -m matrix.ci.fork")  # only the run of cells
    assert forked.startswith(f"( python -m matrix.ci.fork {run}")
    with pytest.raises(ToxError, match="needs tox itself"):
        read_env(TOX_INI, "explore")  # {env_tmp_dir}
    with pytest.raises(ToxError, match="no env nothing"):
        read_env(TOX_INI, "nothing")


def options(tmp_path: Path, **chosen: Any) -> substitutions.Options:
    return substitutions.Options(REPO / "docs/ci/github-workflow.yml", REPO, tmp_path, **chosen)


@needs_vllm
def test_here_runs_the_env_s_commands_in_this_environment(tmp_path: Path) -> None:
    version = installed_vllm_version()
    envs = ("vllm" + release.replace(".", "") for release in RELEASES)
    env = next(e for e in envs if read_env(TOX_INI, e).release == version)
    script = f'python -m pip install "tox==$V"\npython -m tox -e {env} -- --group 2 || s=$?\n'
    here = substitutions.substitute(script, options(tmp_path, here=True, pytest_args=("-n", "0")))
    assert here == (  # the cells' run forked from the player (vLLM imported)
        ": tox is not needed with --here\n"
        "python -m matrix.ci.fork run -- --group 2 -n 0 --matrix-may-be-empty || s=$?\n"
    )
    fresh = substitutions.substitute(script, options(tmp_path, here=True, fresh=True))
    assert fresh.endswith("\npython -m matrix run -- --group 2 || s=$?\n")
    other = "vllm030" if env != "vllm030" else "vllm031"
    with pytest.raises(WorkflowError, match=f"tox env {other} installs vLLM .* add --release"):
        substitutions.substitute(f"python -m tox -e {other}", options(tmp_path, here=True))


def test_without_here_the_arguments_reach_every_run_of_cells(tmp_path: Path) -> None:
    """``-- ARGS`` reach each suite's run of cells (a suite holding none of a filter's cells
    is an empty run there), ``--release`` the cross-version table, nothing the merge."""
    chosen = options(tmp_path, pytest_args=("-k", "single_group"), releases=("0.31.0",))
    script = (
        "python -m tox -e vllm031 -- --group 1\npython -m tox -e connectors031\n"
        "python -m tox -e sweep031\npython -m tox -e merge\npython -m tox -e crossversion\n"
    )
    added = "-k single_group --matrix-may-be-empty"
    assert substitutions.substitute(script, chosen) == (
        f"python -m tox -e vllm031 -- --group 1 {added}\n"
        f"python -m tox -e connectors031 -- {added}\npython -m tox -e sweep031 -- {added}\n"
        "python -m tox -e merge\npython -m tox -e crossversion -- --release 0.31.0\n"
    )


def test_artifacts_go_up_and_come_down_as_the_actions_store_them(tmp_path: Path) -> None:
    one, two, merged = tmp_path / "one", tmp_path / "two", tmp_path / "merged"
    for workspace, shard in ((one, 1), (two, 2)):
        (workspace / "reports" / "shards").mkdir(parents=True)
        (workspace / "reports" / "shards" / f"s{shard}.json").write_text("{}")
        outcome = steps.emulate(
            "up",
            "actions/upload-artifact@v7",
            {"name": f"shard-{shard}", "path": "reports/shards/"},
            workspace,
            tmp_path,
        )
        assert outcome.status == "success" and outcome.detail == f"artifact shard-{shard}: 1 files"
    assert (tmp_path / "artifacts" / "shard-1" / "s1.json").is_file()  # under the folder named
    again = steps.emulate(
        "up", "actions/upload-artifact@v7", {"name": "shard-1", "path": "reports"}, one, tmp_path
    )
    assert again.status == "failure" and "already uploaded" in again.detail
    down = {"pattern": "shard-*", "path": "reports/shards", "merge-multiple": "true"}
    steps.emulate("down", "actions/download-artifact@v8", down, merged, tmp_path)
    assert sorted(p.name for p in (merged / "reports" / "shards").iterdir()) == [
        "s1.json",
        "s2.json",
    ]
    apart = tmp_path / "apart"
    steps.emulate("down", "actions/download-artifact@v8", {"path": "a"}, apart, tmp_path)
    assert (apart / "a" / "shard-2" / "s2.json").is_file()  # each in a folder of its name
    empty = {"name": "none", "path": "nothing/", "if-no-files-found": "error"}
    assert (
        steps.emulate("up", "actions/upload-artifact@v7", empty, one, tmp_path).status == "failure"
    )
    with pytest.raises(steps.StepError, match="cannot play the action someone/else@v1"):
        steps.emulate("x", "someone/else@v1", {}, one, tmp_path)


TOY = """\
name: toy
on: push
env:
  GREETING: hello
defaults:
  run:
    shell: bash
jobs:
  part:
    name: part ${{ matrix.n }}
    strategy:
      matrix:
        n: [1, 2]
    steps:
      - uses: actions/checkout@v7
      - run: mkdir -p out && echo "$GREETING ${{ matrix.n }}" > "out/part-${{ matrix.n }}.txt"
      - run: test ${{ matrix.n }} -eq 1
      - name: only after a failure
        if: failure()
        run: echo "part ${{ matrix.n }} failed" >> "$GITHUB_STEP_SUMMARY"
      - uses: actions/upload-artifact@v7
        if: ${{ !cancelled() }}
        with:
          name: part-${{ matrix.n }}
          path: out/
  whole:
    needs: part
    steps:
      - run: echo never, a part failed
  always:
    needs: part
    if: ${{ !cancelled() }}
    steps:
      - uses: actions/download-artifact@v8
        with:
          path: parts
          merge-multiple: true
      - run: cat parts/*.txt > "$GITHUB_STEP_SUMMARY"
"""


def test_a_workflow_played_job_by_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    (repo / ".github").mkdir(parents=True)
    (repo / ".github" / "toy.yml").write_text(TOY)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    out = tmp_path / "out"
    code = play.main([str(repo / ".github" / "toy.yml"), "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 1, printed
    jobs = json.loads((out / "play.json").read_text())
    assert [(j["name"], j["status"]) for j in jobs] == [
        ("part 1", "success"),
        ("part 2", "failure"),
        ("whole", "skipped"),
        ("always", "success"),
    ]
    assert [s["status"] for s in jobs[1]["steps"]] == ["success"] * 2 + [
        "failure",
        "success",
        "success",
    ]
    assert jobs[0]["steps"][3]["status"] == "skipped"  # if: failure(), after none
    assert Path(jobs[1]["summary"]).read_text() == "part 2 failed\n"
    assert Path(jobs[3]["summary"]).read_text() == "hello 1\nhello 2\n"
    assert "FAILED  Run test 2 -eq 1" in printed


# A job's `python -m matrix` in a folder of its own: what it was given, and where it runs.
FAKE_MATRIX = """\
import os, sys
print("argv", sys.argv[1:])
print("main", __file__)
print("parent", os.getppid())
print("value", os.environ.get("STEP_VALUE"))
print("stdin", sys.stdin.readline().strip())
print("kept", "tests.helpers" in sys.modules, [n for n in sys.modules if n.startswith("matrix.")])
print("to stderr", file=sys.stderr)
if os.environ.get("PID_FILE"):
    open(os.environ["PID_FILE"], "w").write(str(os.getpid()))
    import time; time.sleep(60)
sys.exit(3)
"""


def fake_checkout(tmp_path: Path) -> Path:
    job = tmp_path / "job"
    (job / "matrix").mkdir(parents=True)
    (job / "matrix" / "__init__.py").write_text("")
    (job / "matrix" / "__main__.py").write_text(FAKE_MATRIX)
    return job


def forked_job(job: Path, server: fork.ForkServer) -> list[str]:
    """``python -m matrix.ci.fork`` as a step runs it (``-P``: the client from this
    repository, the job's ``matrix`` from its folder)."""
    return [sys.executable, "-P", "-m", "matrix.ci.fork", "run", "--", "-k", "a b"]


def step_environment(server: fork.ForkServer, **env: str) -> dict[str, str]:
    return {**os.environ, **server.variables, "PYTHONPATH": str(REPO), **env}


def test_a_forked_job_runs_its_own_checkout_s_matrix_with_the_step_s_streams(
    tmp_path: Path,
) -> None:
    """The job is a fork of the server (this process: what it imported stays imported, the
    matrix's modules are dropped), runs ``python -m matrix`` from the step's folder, with the
    step's arguments, environment and streams, and its exit code is the step's."""
    job = fake_checkout(tmp_path)
    with fork.ForkServer() as server:
        done = subprocess.run(
            forked_job(job, server),
            cwd=job,
            env=step_environment(server, STEP_VALUE="seen"),
            input="hello\n",
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        server_pid = server.pid
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines() == [
        "argv ['run', '--', '-k', 'a b']",
        f"main {job / 'matrix' / '__main__.py'}",
        f"parent {server_pid}",
        "value seen",
        "stdin hello",
        "kept True []",
    ]
    assert done.stderr == "to stderr\n"


def test_a_step_that_ends_first_takes_its_forked_job_with_it(tmp_path: Path) -> None:
    """A step killed at its time limit (its process group, as ``steps.run_script`` does)
    leaves no job running; the server forks the next one."""
    job, pid_file = fake_checkout(tmp_path), tmp_path / "pid"
    with fork.ForkServer() as server:
        step = subprocess.Popen(
            forked_job(job, server),
            cwd=job,
            env=step_environment(server, PID_FILE=str(pid_file)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while not pid_file.is_file() or not pid_file.read_text():
            assert time.monotonic() < deadline and step.poll() is None
            time.sleep(0.05)
        os.killpg(step.pid, signal.SIGKILL)
        step.wait()
        job_pid = int(pid_file.read_text())
        while time.monotonic() < deadline:
            try:
                os.kill(job_pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            raise AssertionError(f"the job {job_pid} outlived its step")
        again = subprocess.run(
            forked_job(job, server),
            cwd=job,
            env=step_environment(server),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert again.returncode == 3


def test_a_request_the_server_cannot_read_is_refused_and_the_next_served(tmp_path: Path) -> None:
    job = fake_checkout(tmp_path)
    with fork.ForkServer() as server:
        for head in (fork.HEADER.pack(fork.MAX_REQUEST + 1), fork.HEADER.pack(2) + b"[]"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
                raw.connect(str(server.address))
                socket.send_fds(raw, [head], [0, 1, 2])
                assert raw.recv(fork.REPLY.size) == fork.REPLY.pack(2)
        done = subprocess.run(
            forked_job(job, server),
            cwd=job,
            env=step_environment(server),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 3


def test_without_the_player_s_server_the_client_says_so_in_a_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(fork.ADDRESS, raising=False)
    assert fork.client(["run"]) == 2
    assert "no fork server" in capsys.readouterr().err
    monkeypatch.setenv(fork.ADDRESS, str(tmp_path / "gone"))
    assert fork.client(["run"]) == 2
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and "the fork server at" in said
