"""NIXL's side-channel port for a live session: one free port per process, so that two
sessions on one machine never wait on each other. No vLLM.

Every release the live mode runs (0.30-0.32) reads it the same way: ``NixlConnectorScheduler``
takes ``envs.VLLM_NIXL_SIDE_CHANNEL_PORT`` (default 5600) plus the data-parallel index (0
here) when it is built. When an ``EngineCore`` starts, it hands the scheduler's connector
the workers' handshake metadata (the test connector's is empty, but the call is made) and
NIXL starts a ZMQ listener on that port and waits until it is bound: on a port another process
holds, the engine's start waits for ever. A scheduler's shutdown joins its listener, so the
engines of one session, started one after another, reuse the port. vLLM caches its
environment once the first ``EngineCore`` has started (``envs.enable_envs_cache``): the port
is chosen once per process, before any engine.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import tempfile
from pathlib import Path
from typing import IO

PORT_VARIABLE = "VLLM_NIXL_SIDE_CHANNEL_PORT"
HOST_VARIABLE = "VLLM_NIXL_SIDE_CHANNEL_HOST"
DEFAULT_HOST = "localhost"  # vLLM's default
# The ports tried when none is set: from NIXL's default up, below the kernel's ephemeral range
# (32768 and up on Linux), where other processes' own free-port searches land.
FIRST_PORT = 5600
PORTS_TRIED = 400


class PortTaken(Exception):
    """The side-channel port cannot be used; the message is one line."""


_held: dict[str, tuple[int, IO[str]]] = {}  # per lock folder: the port and its lock file


def claim_side_channel_port(lock_dir: Path | None = None) -> int:
    """Sets ``VLLM_NIXL_SIDE_CHANNEL_PORT`` for this process's engines and returns it: the
    user's when it is free, else :class:`PortTaken`; when unset, the first port from 5600 up
    that is free and that no other live session holds (a lock file per port, in the temporary
    folder, held until the process exits). Idempotent within a process."""
    folder = lock_dir or Path(tempfile.gettempdir())
    if str(folder) in _held:
        return _held[str(folder)][0]
    host = os.environ.get(HOST_VARIABLE) or DEFAULT_HOST
    chosen = os.environ.get(PORT_VARIABLE)
    if chosen:
        port = _user_port(chosen)
        lock = _lock(folder, port)
        if lock is None or not port_free(host, port):
            holder = "another live session" if lock is None else "another process"
            raise PortTaken(
                f"{PORT_VARIABLE}={port}: {holder} holds {host}:{port}; unset it (a free "
                "port is then chosen) or choose another"
            )
    else:
        port, lock = _first_free(folder, host)
        os.environ[PORT_VARIABLE] = str(port)
    _held[str(folder)] = port, lock
    return port


def side_channel_problem() -> str:
    """Why an engine started now would wait for ever on NIXL's side channel ("" when it
    would not): the port this process chose is bound by something else."""
    port = os.environ.get(PORT_VARIABLE)
    host = os.environ.get(HOST_VARIABLE) or DEFAULT_HOST
    if port and port.isdigit() and not port_free(host, int(port)):
        return (
            f"NIXL's side-channel port {host}:{port} ({PORT_VARIABLE}) is taken: the engine "
            "would wait for ever to bind it"
        )
    return ""


def port_free(host: str, port: int) -> bool:
    """Whether a listener can bind ``host:port`` now (with ``SO_REUSEADDR``, as ZMQ binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((socket.gethostbyname(host), port))
        except OSError:
            return False
    return True


def _user_port(value: str) -> int:
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise PortTaken(f"{PORT_VARIABLE}={value}: not a port number")
    return int(value)


def _first_free(folder: Path, host: str) -> tuple[int, IO[str]]:
    for port in range(FIRST_PORT, FIRST_PORT + PORTS_TRIED):
        lock = _lock(folder, port)
        if lock is None:
            continue
        if port_free(host, port):
            return port, lock
        lock.close()
    last = FIRST_PORT + PORTS_TRIED - 1
    raise PortTaken(
        f"no free port for NIXL's side channel on {host} from {FIRST_PORT} to {last}; "
        f"set {PORT_VARIABLE} to a free one"
    )


def _lock(folder: Path, port: int) -> IO[str] | None:
    """The port's lock file, locked for this process; None when another process holds it."""
    path = folder / f"vllm-kv-matrix-nixl-port-{port}.lock"
    try:
        handle = path.open("a")
    except OSError:  # another user's lock file: theirs
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    with contextlib.suppress(OSError):
        path.chmod(0o666)  # so that other users' sessions can lock it in turn
    return handle
