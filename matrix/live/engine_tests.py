"""The live engine's own tests (``tests/test_live_engine.py``: a fresh scheduler per pool runs
as a freshly started engine, the variants patch the engine's scheduler instance, the batch
queue, Mamba layouts, two sessions at once), run before a live session once per install of
the env, not on every call: a marker file in the env's folder holds the key of the install
they passed on (every installed distribution and its version, the matrix code, the tests
themselves). No vLLM: the tests run in a child process.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from matrix.live.port import PORT_VARIABLE
from matrix.report.info import matrix_digest

ENGINE_TESTS = Path("tests") / "test_live_engine.py"
MARKER = ".matrix-live-engine-tests"
# A bound on the tests' wall time (about 5 minutes on a loaded 2-core machine).
TESTS_SECONDS = 3600


def install_key(tests: Path = ENGINE_TESTS) -> str:
    """What the engine's tests passed on: the env's distributions, the matrix code, the tests."""
    digest = hashlib.sha256()
    installed = sorted(
        f"{dist.metadata['Name']}=={dist.version}" for dist in importlib.metadata.distributions()
    )
    digest.update("\n".join(installed).encode())
    digest.update(matrix_digest().encode())
    digest.update(tests.read_bytes())
    return digest.hexdigest()[:16]


def run_engine_tests(
    marker_dir: Path, say: Callable[[str], None] = print, tests: Path = ENGINE_TESTS
) -> int:
    """Runs the engine's tests unless the marker in ``marker_dir`` says they passed on this
    install; writes it when they pass. pytest's exit status (0 when not run)."""
    if not tests.is_file():
        say(f"the live engine's tests: {tests} is not here (run from the repository): not run")
        return 0
    key = install_key(tests)
    marker = marker_dir / MARKER
    if marker.is_file() and marker.read_text().strip() == key:
        say(f"the live engine's tests passed on this install ({marker}): not run again")
        return 0
    say(f"the live engine's tests, once per install of this env: {tests}")
    command = [sys.executable, "-m", "pytest", str(tests), "-q", "-p", "no:cacheprovider"]
    try:
        # The tests' engines choose their own side-channel port: this process holds its own.
        env = {name: value for name, value in os.environ.items() if name != PORT_VARIABLE}
        status = subprocess.run(command, check=False, timeout=TESTS_SECONDS, env=env).returncode
    except subprocess.TimeoutExpired:
        say(f"the live engine's tests ran past {TESTS_SECONDS} s")
        return 1
    if status == 0:
        marker_dir.mkdir(parents=True, exist_ok=True)
        marker.write_text(key + "\n")
    return status
