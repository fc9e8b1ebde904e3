"""One live run: a case's events on a live engine at one pool, under one variant, played by the
harness's own playback (the same events, load completions, aborts, block accounting and
deadline), with the live hang rule in place of the harness's stuck rule."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from matrix.adapters.handle import Handle
from matrix.case.format import CaseFile
from matrix.live.engine import LiveEngine
from matrix.live.handle import LiveHandle, live_handle_type
from matrix.run.playback import Playback, cell_clock
from matrix.run.pools import play_pool
from matrix.run.records import RunTrace
from matrix.run.variants import Variant

# Engine steps without progress after which a live run has hung (the harness stops after 2:
# its scheduler is deterministic; a real engine is given longer to show it).
HANG_STEPS = 8


@dataclass
class LivePlayback(Playback):
    """The harness's playback, stopping after ``hang_steps`` engine steps in which nothing
    was scheduled, no request's state or the free blocks changed, and no load is left to
    report."""

    hang_steps: int = HANG_STEPS

    def stuck(self) -> bool:
        """Whether the engine has made no progress for ``hang_steps`` steps."""
        if len(self.records) <= self.hang_steps:
            return False
        recent = self.records[-(self.hang_steps + 1) :]
        if not all(not r.scheduled and r.state == recent[0].state for r in recent):
            return False
        finishing, failing = self._loads_to_report()
        return not (finishing or failing)


class UncleanEngine(Exception):
    """A run left the engine with requests or blocks it could not drain."""


def run_live_pool(
    engine: LiveEngine,
    handle_type: type[Handle],
    case: CaseFile,
    variant: Variant,
    pool: int,
    hang_steps: int = HANG_STEPS,
    deadline: float = math.inf,
    clock: Callable[[], float] = cell_clock,
) -> RunTrace:
    """A fresh scheduler of ``pool`` blocks on ``engine``, driven by the release's handle
    (``handle_type``) made live, and played as the harness plays a pool (``play_pool``) with
    the live hang rule. Raises :class:`UncleanEngine` when the engine could not be drained
    afterwards, and ``CellTimeout`` past the deadline."""
    handles: list[LiveHandle] = []

    def build() -> LiveHandle:
        # A class is hashable; mypy reads a class's __hash__ as its instances' (the cache's key).
        live_type = live_handle_type(handle_type)  # type: ignore[arg-type]
        handles.append(live_type(engine, pool))
        return handles[-1]

    try:
        return play_pool(
            pool,
            case,
            variant,
            build,
            partial(LivePlayback, hang_steps=hang_steps),
            deadline=deadline,
            clock=clock,
        )
    finally:
        if handles and not handles[0].finish():
            raise UncleanEngine(f"pool {pool}: the engine kept requests or blocks after the run")
