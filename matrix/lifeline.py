"""Every process the matrix starts dies with the process that started it: on Ctrl-C, on a
SIGTERM or SIGHUP, and on the parent's own death however it came (a SIGKILL included), none is
left running at full CPU, reparented to PID 1.

Two halves. A forked child asks the kernel for a signal when its parent ends (Linux's
``PR_SET_PDEATHSIG``, through ``prctl``), then checks its parent is still the one that forked
it (a parent that died before the request leaves no signal to send). The parent keeps its
children in :class:`Children`: within ``watching()`` a SIGTERM or SIGHUP ends it as Ctrl-C does
(:class:`Terminated`, a ``KeyboardInterrupt``), and on the way out by any exception it kills
and reaps the children still running. A command started with ``subprocess`` (a CI step's
shell) runs under this file as a script (:func:`lifeline_command`): the script leads the
step's process group, asks for the signal, and when its parent dies kills the whole group.

Elsewhere than Linux the request is a no-op: the handlers still kill the children on the
signals this process can catch. This module imports the standard library only: it also runs
as a bare script (``python -I -S lifeline.py``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType

PR_SET_PDEATHSIG = 1  # linux/prctl.h
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # ended as Ctrl-C ends the process


def _find_prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, looked up once in the parent (a lookup after a fork of a process with
    threads can deadlock on the loader's lock)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return function


_PRCTL = _find_prctl()


def die_with_parent(parent: int, signum: int = signal.SIGKILL) -> None:
    """In a child just forked from ``parent`` (a pid): the kernel sends it ``signum`` when the
    parent's forking thread ends; if the parent has already ended, the child ends now. The
    parent's handlers (``watching``'s) are undone: they are about the parent's children."""
    for ending in ENDING_SIGNALS:
        signal.signal(ending, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


class Terminated(KeyboardInterrupt):
    """A SIGTERM or SIGHUP, raised where Ctrl-C's ``KeyboardInterrupt`` would be."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


class Children:
    """The processes this one forked and has not reaped yet."""

    def __init__(self) -> None:
        self.pids: set[int] = set()

    def fork(self, signum: int = signal.SIGKILL) -> int:
        """``os.fork()``; the child (given 0) dies with this process by ``signum``."""
        parent = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self.pids = set()  # the parent's children are not the child's
            die_with_parent(parent, signum)
        else:
            self.pids.add(pid)
        return pid

    def reap(self, pid: int, options: int = 0) -> tuple[int, int]:
        """``os.waitpid(pid, options)``, the child forgotten once it is reaped."""
        done, status = os.waitpid(pid, options)
        if done:
            self.pids.discard(pid)
        return done, status

    def kill_all(self) -> None:
        """Kills and reaps every child still running (never a reaped one: its pid may be
        another process's by now)."""
        for pid in sorted(self.pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in sorted(self.pids):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        self.pids.clear()

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Within: a SIGTERM or SIGHUP raises :class:`Terminated` (``ending_as_interrupts``);
        leaving by any exception kills the children first."""
        with ending_as_interrupts():
            try:
                yield
            except BaseException:
                self.kill_all()
                raise


@contextlib.contextmanager
def ending_as_interrupts() -> Iterator[None]:
    """Within: a SIGTERM or SIGHUP raises :class:`Terminated` where Ctrl-C would raise
    ``KeyboardInterrupt``, so that ``finally`` blocks and context managers end what this
    process started (in the main thread only, where Python runs handlers)."""
    handled = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, _terminated) for s in ENDING_SIGNALS} if handled else {}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def exit_status(signum: int) -> int:
    """The exit status a shell gives a process its signal ended: 128 + the signal."""
    return 128 + signum


def lifeline_command(command: list[str]) -> list[str]:
    """``command`` run under this file as a script, tied to this process: start it with
    ``start_new_session=True`` so that the group it kills is the command's own."""
    return [sys.executable, "-I", "-S", __file__, str(os.getpid()), *command]


def _kill_group(signum: int, frame: FrameType | None) -> None:
    os.killpg(0, signal.SIGKILL)  # the command's whole group, this script included


def _lifeline(argv: list[str]) -> int:
    """As a script: ``PARENT COMMAND...`` runs COMMAND in this process group and ends the
    group when PARENT dies or this script is sent a SIGTERM; COMMAND's exit status."""
    parent, command = int(argv[0]), argv[1:]
    die_with_parent(parent, signal.SIGTERM)
    signal.signal(signal.SIGTERM, _kill_group)
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)
        except OSError as error:
            print(f"lifeline: cannot run {command[0]}: {error.strerror}", file=sys.stderr)
        os._exit(127)
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else exit_status(-code)


if __name__ == "__main__":
    sys.exit(_lifeline(sys.argv[1:]))
