"""The live mode's command line before anything slow: arguments checked in one line, pytest's
flag names, one bad case file among good ones, NIXL's side-channel port per session, and the
engine's own tests run once per install. No engine starts here (test_live_engine.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from matrix.live.engine_tests import MARKER, run_engine_tests
from matrix.live.port import PORT_VARIABLE, PortTaken, claim_side_channel_port, port_free
from matrix.live.session import Options, keyword_filter, session_cells
from tests.helpers import CASES, forked_main

ROOT = Path(__file__).resolve().parent.parent


def _live(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m matrix live ARGS`` in a child; it prints whether it imported vLLM."""
    script = (
        "import sys; from matrix.__main__ import main; status = main(sys.argv[1:]); "
        "print('imported vllm:', 'vllm' in sys.modules); sys.exit(status)"
    )
    return subprocess.run(
        [sys.executable, "-c", script, "live", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env or _without_port(),  # an earlier test may have claimed one for this process
        check=False,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--matrix-report", "out.txt"], "--matrix-report out.txt: use a .md or .json file name"),
        (["--hang-steps", "0"], "--hang-steps: at least 1"),
        (["-k", "two_loads and ("], "-k 'two_loads and ('"),
        (["cases/no_such_case.yaml"], "cases/no_such_case.yaml: no such case file or folder"),
    ],
)
def test_arguments_are_checked_before_vllm_is_imported(args: list[str], message: str) -> None:
    done = _live(*args)
    assert done.returncode == 2
    assert done.stderr.strip().startswith(message) and "\n" not in done.stderr.strip()
    assert "imported vllm: False" in done.stdout


def test_the_report_flag_is_pytests() -> None:
    done = _live("--report", "out.txt")  # the former name still works
    assert "--matrix-report out.txt" in done.stderr


def test_k_is_pytests_expression() -> None:
    matches = keyword_filter("two_loads and not none")
    assert matches("live_two_loads-fixed live_two_loads.yaml")
    assert not matches("live_two_loads-none live_two_loads.yaml")
    assert keyword_filter("LIVE_SINGLE")("live_single_group-none x.yaml")  # any case
    assert keyword_filter("")("anything")


@pytest.mark.once
def test_one_bad_case_file_among_good_ones_is_one_line(
    adapter: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The good files' run is a fork of this process (vLLM imported already); the bad file's
    alone is a fresh one, which shows it is refused before vLLM is imported."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: broken\ngroups: 3\n")
    good = tmp_path / "live_single_group.yaml"
    good.write_text((CASES / "live_single_group.yaml").read_text())
    cells, invalid = session_cells(Options(paths=(tmp_path,), keyword="none"))
    assert [cell.test_id for cell in cells] == ["live_single_group-none"]
    assert len(invalid) == 1 and invalid[0].startswith(f"{broken}:")
    report = tmp_path / "live.json"
    args = ["live", str(broken), str(good), "-k", "none", "--matrix-report", str(report)]
    monkeypatch.delenv(PORT_VARIABLE, raising=False)  # a port an earlier test claimed here
    done = forked_main(args, ROOT)
    lines = done.stderr.splitlines()  # then vLLM's own warnings, where a device runs the cell
    assert lines[0].startswith(f"{broken}:") and sum(str(broken) in line for line in lines) == 1
    assert done.returncode == 1  # the good cases ran (or were skipped without a device)
    assert json.loads(report.read_text())["invalid_case_files"] == invalid
    only_bad = _live(str(broken))
    assert only_bad.returncode == 2 and "imported vllm: False" in only_bad.stdout


def _without_port() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != PORT_VARIABLE}


def test_each_session_gets_its_own_free_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; "
            "from matrix.live.port import claim_side_channel_port as claim; "
            f"print(claim(Path({str(tmp_path)!r})), flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_without_port(),
        cwd=ROOT,
    )
    try:
        assert holder.stdout is not None
        held = int(holder.stdout.readline())
        monkeypatch.delenv(PORT_VARIABLE, raising=False)
        mine = claim_side_channel_port(tmp_path)
        assert mine != held and os.environ[PORT_VARIABLE] == str(mine)
        assert port_free("localhost", mine)
        assert claim_side_channel_port(tmp_path) == mine  # once per process
    finally:
        holder.communicate("", timeout=60)


def test_a_taken_port_the_user_chose_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv(PORT_VARIABLE, str(port))
        with pytest.raises(PortTaken) as refused:
            claim_side_channel_port(tmp_path)
        message = str(refused.value)
        assert message.startswith(f"{PORT_VARIABLE}={port}:") and "\n" not in message
        env = {**os.environ, PORT_VARIABLE: str(port)}
        done = _live(str(CASES / "live_single_group.yaml"), env=env)
    assert done.returncode == 2 and f"{PORT_VARIABLE}={port}" in done.stderr
    assert "imported vllm: False" in done.stdout


def test_the_engine_tests_run_once_per_install(tmp_path: Path) -> None:
    tests = tmp_path / "test_engine_stand_in.py"
    tests.write_text("def test_passes() -> None:\n    pass\n")
    said: list[str] = []
    assert run_engine_tests(tmp_path, said.append, tests) == 0
    assert (tmp_path / MARKER).is_file() and "once per install" in said[-1]
    assert run_engine_tests(tmp_path, said.append, tests) == 0
    assert "not run again" in said[-1]
    tests.write_text("def test_fails() -> None:\n    assert False\n")  # the tests changed
    assert run_engine_tests(tmp_path, said.append, tests) == 1
    assert "once per install" in said[-1]
