"""``python -m matrix.ci.fork ARGS``: a played job's ``python -m matrix ARGS``, run in a fork of
the player, which imported vLLM once, so that three shard jobs pay vLLM's import once, not
three times (``play --here``; ``--fresh`` keeps a new interpreter per job).

The player starts a :class:`ForkServer` after importing vLLM: a process forked from it, waiting
on a Unix socket in a folder only this user may open. What ``--here`` writes for an env's
``python -m matrix run`` is this module's client, an interpreter that imports nothing of the
matrix's but this module and ``fork_job`` (the standard library's only): it hands the server its
arguments, working directory, environment and standard streams, and exits with the job's exit
code. The server forks the job from itself; the job (``fork_job``) takes the step's streams,
folder and environment, drops every ``matrix`` module and puts its folder first on ``sys.path``
(as ``python -m`` does), so that the matrix is imported afresh from the job's checkout, and runs
``python -m matrix ARGS``; vLLM, torch and the other libraries stay imported. The job is a
process group of its own: when the step ends first (its time limit kills it), the server kills
the job's group. One job at a time, as the player plays.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import shutil
import signal
import socket
import struct
import sys
import tempfile
import traceback
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from matrix.ci.fork_job import run_job
from matrix.lifeline import die_with_parent

FORKED = "python -m matrix.ci.fork"  # what stands for `python -m matrix` in a forked job
ADDRESS = "MATRIX_CI_FORK_SERVER"  # the variable naming the server's socket, in each step
MAX_REQUEST = 1 << 20  # bytes: the arguments, folder and environment, as JSON
HEADER = struct.Struct("!I")  # the request's length, sent with the streams
REPLY = struct.Struct("!i")  # the job's exit code
POLL = 0.05  # seconds between looks at the job while its step waits


class ForkError(Exception):
    """The fork server cannot start; the message is one line."""


class ForkServer:
    """A process forked from this one (vLLM imported) that forks each job asked of it;
    ``with ForkServer() as server:`` and ``server.variables`` in each step's environment."""

    def __init__(self) -> None:
        self.folder = Path()  # made on entering
        self.pid = 0

    @property
    def address(self) -> Path:
        """The server's socket."""
        return self.folder / "socket"

    @property
    def variables(self) -> dict[str, str]:
        """What a step's environment needs for ``python -m matrix.ci.fork`` to find us."""
        return {ADDRESS: str(self.address)}

    def __enter__(self) -> ForkServer:
        self.folder = Path(tempfile.mkdtemp(prefix="matrix-fork-"))  # mode 0700: ours only
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(self.address))
            listener.listen(1)
        except OSError as error:
            listener.close()
            shutil.rmtree(self.folder, ignore_errors=True)
            raise ForkError(f"cannot listen on {self.address}: {error.strerror}") from None
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:
            die_with_parent(parent, signal.SIGTERM)  # _stop's signal: its job is killed too
            _serve(listener, parent)
        listener.close()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        os.waitpid(self.pid, 0)
        shutil.rmtree(self.folder, ignore_errors=True)


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def _serve(listener: socket.socket, parent: int) -> None:
    """The server's loop, one job at a time, until the player ends or stops it; never
    returns."""
    code = 0
    try:
        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the player's to handle
        listener.settimeout(1.0)
        while os.getppid() == parent:
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                try:
                    _serve_one(listener, connection)
                except Exception as error:  # one request's trouble; the next is served
                    print(f"matrix.ci.fork: a job failed: {error!r}", file=sys.stderr)
    except SystemExit:
        pass
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        os._exit(code)


def _serve_one(listener: socket.socket, connection: socket.socket) -> None:
    """One job: its request read, the job forked, its exit code sent back (a step that
    ends first has its job's group killed)."""
    connection.settimeout(10.0)  # a client sends its request at once
    try:
        request, streams = _receive(connection)
    except (OSError, ValueError) as error:
        with contextlib.suppress(OSError):
            connection.sendall(REPLY.pack(2))
        print(f"matrix.ci.fork: a request refused: {error}", file=sys.stderr)
        return
    server = os.getpid()
    pid = os.fork()
    if pid == 0:
        die_with_parent(server)
        connection.close()
        listener.close()
        run_job(request, streams)
    for stream in streams:
        os.close(stream)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # also here, so that a kill cannot come before the job's own
    code = None
    try:
        code = _supervise(connection, pid)
    finally:
        if code is None:  # the step ended first, or the server is stopped
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    if code is not None:
        with contextlib.suppress(OSError):
            connection.sendall(REPLY.pack(code))


def _supervise(connection: socket.socket, pid: int) -> int | None:
    """The job's exit code, or None as soon as its step's end closes the connection."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        readable, _, _ = select.select([connection], [], [], POLL)
        if readable and not _gone_or_said(connection):
            return None


def _gone_or_said(connection: socket.socket) -> bytes:
    """What the step sent after its request: nothing (b"") once it has ended."""
    try:
        return connection.recv(1)
    except OSError:
        return b""


def _receive(connection: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """The request (its arguments, folder and environment) and the step's three streams."""
    head, streams, _, _ = socket.recv_fds(connection, HEADER.size, 3)
    try:
        return _request(connection, head), _three(streams)
    except (OSError, ValueError):
        for stream in streams:
            os.close(stream)
        raise


def _three(streams: list[int]) -> list[int]:
    if len(streams) != 3:
        raise ValueError(f"{len(streams)} streams, not 3")
    return streams


def _request(connection: socket.socket, head: bytes) -> dict[str, Any]:
    head += _exactly(connection, HEADER.size - len(head))
    (size,) = HEADER.unpack(head)
    if size > MAX_REQUEST:
        raise ValueError(f"a request of {size} bytes, over {MAX_REQUEST}")
    try:
        request = json.loads(_exactly(connection, size))
    except RecursionError:
        raise ValueError("a request nested too deep") from None
    if not (
        isinstance(request, dict)
        and isinstance(request.get("argv"), list)
        and all(isinstance(a, str) for a in request["argv"])
        and isinstance(request.get("cwd"), str)
        and isinstance(request.get("env"), dict)
        and all(isinstance(v, str) for v in request["env"].values())
    ):
        raise ValueError("not a request of argv, cwd and env")
    return request


def _exactly(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise ValueError("the request ended early")
        data += chunk
    return data


def client(argv: list[str]) -> int:
    """Asks the player's fork server for ``python -m matrix ARGV`` here; its exit code."""
    address = os.environ.get(ADDRESS)
    if not address:
        print(
            f"{FORKED}: no fork server ({ADDRESS} is unset): run python -m matrix", file=sys.stderr
        )
        return 2
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    payload = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        try:
            connection.connect(address)
            socket.send_fds(connection, [HEADER.pack(len(payload))], [0, 1, 2])
            connection.sendall(payload)
            reply = io.BytesIO()
            while reply.tell() < REPLY.size:
                chunk = connection.recv(REPLY.size - reply.tell())
                if not chunk:
                    break
                reply.write(chunk)
        except OSError as error:
            print(f"{FORKED}: the fork server at {address}: {error.strerror}", file=sys.stderr)
            return 2
    if reply.tell() < REPLY.size:
        print(f"{FORKED}: the fork server ended before the job did", file=sys.stderr)
        return 1
    (code,) = REPLY.unpack(reply.getvalue())
    return int(code) if code >= 0 else 128 - int(code)  # killed by a signal: as a shell says


if __name__ == "__main__":
    sys.exit(client(sys.argv[1:]))
