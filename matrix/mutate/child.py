"""One forked child: a mutant installed, then a suite's items run in order until one fails.

The child tells its parent, a line of JSON each up a pipe, which item it starts and how each
ended; the first failure ends it. Its bounds are on its own CPU time, never on the wall
clock: an item that runs past its bound without ending is a hang (the mutant looped: a
kill), and a child whose items keep ending but whose CPU time reaches the mutant's budget
stops with its mutant undecided. The parent holds a silence bound too, for a child that
waits on something without using CPU.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType

HANG_EXIT = 86  # the child's exit code when an item ran past its CPU bound
RunItem = Callable[[int, int | None], bool]  # (item, next item) -> passed


@dataclass(frozen=True)
class Bounds:
    """CPU seconds: each item's bound (``floor`` or ``factor`` times its baseline, the larger)
    and the whole mutant's budget."""

    floor: float = 10.0
    factor: float = 20.0
    budget: float = 120.0

    def item(self, baseline_cpu: float) -> float:
        """The CPU time an item may take under a mutant before it counts as a hang."""
        return max(self.floor, self.factor * baseline_cpu)


def cpu_seconds() -> float:
    """This process's CPU time (user and system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _send(fd: int, message: dict[str, object]) -> None:
    os.write(fd, (json.dumps(message) + "\n").encode())


def keep_frozen() -> None:
    """Keeps what the parent froze frozen in this child: vLLM's own test cleanup
    (``cleanup_dist_env_and_memory``) unfreezes before its ``gc.collect()``, which then walks the
    whole imported vLLM and torch, 0.45 CPU-s a test against 0.015. The parent collected before
    it froze, so nothing frozen is garbage; what a test makes is never frozen and is collected
    as before."""
    gc.unfreeze = _stay_frozen


def _stay_frozen() -> None:
    """``gc.unfreeze`` in a child: a no-op (see :func:`keep_frozen`)."""


def run_child(
    fd: int,
    install: Callable[[], None],
    order: Sequence[int],
    baseline_cpu: Sequence[float],
    run_item: RunItem,
    bounds: Bounds,
) -> None:
    """The child's whole life (it never returns): install, run ``order``'s items, report."""
    code = 0
    try:
        keep_frozen()
        started = cpu_seconds()
        install()
        for position, index in enumerate(order):
            spent = cpu_seconds() - started
            if spent >= bounds.budget:
                _send(fd, {"event": "budget", "cpu": spent})
                break
            _send(fd, {"event": "start", "item": index})
            _arm(fd, index, bounds.item(baseline_cpu[index]))
            before = cpu_seconds()
            following = order[position + 1] if position + 1 < len(order) else None
            passed = run_item(index, following)
            signal.setitimer(signal.ITIMER_PROF, 0)
            _send(
                fd, {"event": "end", "item": index, "passed": passed, "cpu": cpu_seconds() - before}
            )
            if not passed:
                break
        _send(fd, {"event": "done", "cpu": cpu_seconds() - started})
    except BaseException as error:  # the parent records it: the mutant could not run
        _send(fd, {"event": "error", "detail": f"{type(error).__name__}: {error}"[:300]})
        code = 1
    finally:
        sys.stdout.flush()
        os._exit(code)


def _arm(fd: int, index: int, seconds: float) -> None:
    """An item past ``seconds`` of CPU ends the child as a hang."""

    def hang(signum: int, frame: FrameType | None) -> None:
        _send(fd, {"event": "hang", "item": index})
        os._exit(HANG_EXIT)

    signal.signal(signal.SIGPROF, hang)
    signal.setitimer(signal.ITIMER_PROF, seconds)
