"""One run of a case at one pool size under one variant, and the pool sizes a case sweeps."""

from __future__ import annotations

import math
from collections.abc import Callable

from matrix.adapters.protocol import SchedulerHandle, VersionAdapter
from matrix.case.format import CaseFile
from matrix.case.model import FitSweep
from matrix.case.workload import StartableSweep
from matrix.run.play_events import play
from matrix.run.playback import CellTimeout, Playback, cell_clock
from matrix.run.records import Fit, RunTrace
from matrix.run.variants import VARIANTS, Variant


def run_pool(
    adapter: VersionAdapter,
    case: CaseFile,
    variant: Variant | str,
    pool: int,
    deadline: float = math.inf,
    clock: Callable[[], float] = cell_clock,
    record_blocks: bool = False,
) -> RunTrace:
    """A fresh scheduler of ``pool`` blocks, ``variant`` (a built-in's name or any
    :class:`Variant`) installed on it, the requests added and the case's events played.
    vLLM raising is a trace that stopped with ``error``; a passed deadline raises
    :class:`CellTimeout`. ``record_blocks``: each group's blocks per request after every
    step too (for a picture; see run/steps.py)."""
    rule = VARIANTS[variant] if isinstance(variant, str) else variant
    return play_pool(
        pool,
        case,
        rule,
        lambda: adapter.build(case, pool),
        deadline=deadline,
        clock=clock,
        record_blocks=record_blocks,
    )


def play_pool(
    pool: int,
    case: CaseFile,
    rule: Variant,
    build: Callable[[], SchedulerHandle],
    playback: Callable[..., Playback] = Playback,
    deadline: float = math.inf,
    clock: Callable[[], float] = cell_clock,
    record_blocks: bool = False,
) -> RunTrace:
    """One run on the handle ``build`` gives (the harness's scheduler, or a live engine's):
    ``rule`` installed, the requests added, the events played by ``playback`` (the harness's
    :class:`Playback`, or a subclass with another stuck rule), as a :class:`RunTrace`. vLLM
    raising is a trace that stopped with ``error``; a passed deadline raises
    :class:`CellTimeout`."""
    played: Playback | None = None
    groups: tuple[str, ...] = ()
    try:
        handle = build()
        if handle.tier_unfilled:  # the case would run on a tier other than its own
            return RunTrace(pool, (), "tier_unfilled", handle.tier_unfilled)
        rule.apply(handle)
        for request in case.requests:
            if not request.arrive_after:  # the others arrive as the run goes (Playback)
                handle.add_request(request)
        held: list[tuple[tuple[int, ...], ...]] | None = None
        if record_blocks:
            groups, held = handle.group_labels(), []
        played = playback(handle, case, deadline=deadline, clock=clock, held=held)
        stopped, unmet = play(played, list(case.events))
        return RunTrace(
            pool,
            tuple(played.records),
            stopped,
            unmet_expectation=unmet,
            leak=played.leak,
            protocol=played.protocol,
            reserved=played.reserved,
            groups=groups,
            held=tuple(held or ()),
        )
    except CellTimeout:
        raise
    except Exception as error:  # vLLM raising is an outcome to report, not a crash
        if played is None:
            return RunTrace(pool, (), "error", f"{type(error).__name__}: {error}")
        return RunTrace(
            pool,
            tuple(played.records),
            "error",
            f"{type(error).__name__}: {error}",
            leak=played.leak,
            protocol=played.protocol,
            reserved=_reservation(played),
            groups=groups,
            held=tuple(played.held or ()),
        )


def _reservation(playback: Playback) -> int | None:
    """The reservation after vLLM raised, if it can still be read."""
    try:
        return playback.handle.reservation()
    except Exception:  # the scheduler is in whatever state the error left it
        return None


def pool_sizes(case: CaseFile, fit: Fit | None = None, startable: int | None = None) -> list[int]:
    """The pools a case runs at; a sweep relative to the fit needs the fit, one from the pool
    vLLM's start-up sizing gives (``startable``) needs that. A sweep around the fit reaches down
    to where anything is admitted at all, however few blocks ``below`` asks for: a stall can
    happen at any pool that admits a load, and no cell passes while a pool it skipped stalls."""
    if isinstance(case.pool, int):
        return [case.pool]
    if isinstance(case.pool, StartableSweep):
        if startable is None:
            raise ValueError("a pool sweep from startable needs vLLM's start-up sizing of it")
        return list(range(startable, startable + case.pool.above_startable + 1))
    if isinstance(case.pool, FitSweep):
        if fit is None:
            raise ValueError("a pool sweep relative to the fit needs the fit")
        start = max(2, min(fit.blocks - case.pool.below, fit.admits_from))
        return list(range(start, fit.blocks + case.pool.above + 1))
    return list(range(case.pool.start, case.pool.stop + 1))
