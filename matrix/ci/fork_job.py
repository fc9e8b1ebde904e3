"""A forked job of :mod:`matrix.ci.fork`'s server: in the fork, the step's ``python -m matrix
ARGS`` as the step asked it, with the step's streams, folder and environment, every ``matrix``
module dropped and the job's folder first on ``sys.path``, so that the matrix is imported
afresh from the job's checkout while vLLM, torch and the other libraries stay imported. The
job is a process group of its own, so that the server can kill all of it.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import signal
import sys
import traceback
from typing import Any


def run_job(request: dict[str, Any], streams: list[int]) -> None:
    """``python -m matrix ARGS`` as the step asked, in this fork; never returns."""
    code = 1
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, stream in enumerate(streams):
            os.dup2(stream, target)
            os.close(stream)
        # The process's own streams, open until it ends: no context manager (SIM115).
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for name in [n for n in sys.modules if n == "matrix" or n.startswith("matrix.")]:
            del sys.modules[name]
        # A server in a pytest session (the suite's) has its assertion rewriter on the import
        # path; the job is a program of its own, which imports as a fresh interpreter does.
        from _pytest.assertion.rewrite import AssertionRewritingHook

        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, AssertionRewritingHook)]
        sys.path.insert(0, request["cwd"])
        sys.argv = ["-m", *request["argv"]]
        runpy.run_module("matrix", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as ended:
        code = _exit_code(ended.code)
    except BaseException:
        traceback.print_exc()
    finally:
        for text in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                text.flush()
        os._exit(code)


def _exit_code(code: object) -> int:
    """``sys.exit``'s argument as the process's exit status (a message: printed, 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1
