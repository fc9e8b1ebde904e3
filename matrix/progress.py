"""One progress line for a long run (``python -m matrix run``'s forked workers, the sweep):
how far, of how many once known, and how long is left once the run is past a few seconds.
On a terminal the line is rewritten in place; elsewhere (a CI log, a pipe) a plain line is
printed every tenth of the way once the run is past a few seconds, so a log holds ten lines
at most, not one per cell (a run of a few seconds: its last line only).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

from matrix import wording

ETA_AFTER = 3.0  # seconds: a run shorter than this says no time left (a guess of nothing)
REDRAW = 0.1  # seconds between two rewrites of the line on a terminal
STEPS = 10  # plain lines per run off a terminal


def _seconds(value: float) -> str:
    """``8 s``, ``2 min 05 s``."""
    whole = round(value)
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60:02d} s"


class ProgressLine:
    """``label: 812 of 1764 cells (46%), 3 failed, 12 s, about 14 s left``."""

    def __init__(
        self,
        label: str,
        noun: str,
        stream: TextIO,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.noun = noun
        self.stream = stream
        self.clock = clock
        self.began = clock()
        self.tty = stream.isatty()
        self._drawn_at = -REDRAW
        self._step = 0  # the last tenth printed off a terminal
        self._printed: int | None = None  # the count of the last plain line
        self._width = 0  # the line last drawn, to blank what a shorter one leaves

    def text(self, done: int, total: int | None, detail: str = "") -> str:
        """The line for ``done`` of ``total`` (None: not known yet)."""
        elapsed = self.clock() - self.began
        if total:
            count = f"{done} of {wording.plural(total, self.noun)} ({100 * done // total}%)"
        else:
            count = wording.plural(done, self.noun)
        parts = [count, *([detail] if detail else []), _seconds(elapsed)]
        if total and 0 < done < total and elapsed >= ETA_AFTER:
            left = elapsed / done * (total - done)
            parts.append(f"about {_seconds(left)} left" if left >= 1 else "under 1 s left")
        return f"{self.label}: {', '.join(parts)}"

    def show(self, done: int, total: int | None, detail: str = "") -> None:
        """Shows the progress: on a terminal at most every :data:`REDRAW` seconds, elsewhere
        once per tenth of ``total`` past :data:`ETA_AFTER` seconds (nothing before the total is
        known)."""
        if self.tty:
            now = self.clock()
            if now - self._drawn_at < REDRAW and done != total:
                return
            self._drawn_at = now
            line = self.text(done, total, detail)
            self.stream.write("\r" + line.ljust(self._width))
            self._width = len(line)
        elif total and self.clock() - self.began >= ETA_AFTER:
            step = STEPS * done // total
            if step <= self._step:
                return
            self._step = step
            self._plain(done, total, detail)
        self.stream.flush()

    def _plain(self, done: int, total: int | None, detail: str) -> None:
        self._printed = done
        self.stream.write(self.text(done, total, detail) + "\n")

    def end(self, done: int, total: int | None, detail: str = "") -> None:
        """The last line, ended: on a terminal the line stays, elsewhere it is printed
        unless the last plain line said the same count."""
        if self.tty:
            self._drawn_at = -REDRAW
            self.show(done, total, detail)
            self.stream.write("\n")
        elif self._printed != done:
            self._plain(done, total, detail)
        self.stream.flush()
