"""What runs produce, as plain data: a snapshot per step, a run's trace at one pool size, and
a cell's runs over its pool sizes. ``matrix.judge`` reads these alone, without vLLM."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from matrix.adapters.protocol import SchedulerState, Startable
from matrix.frozen import fast_init

# A cell that stopped before its release was asked (the case could not run).
NOT_ASKED = Startable(None, "not asked: the case did not run")

# How a run stopped: every request finished, nothing could change any more, the step bound
# was reached, or vLLM raised; or it never started, its tier not filled (the message says why).
StopReason = Literal["finished", "stuck", "step_bound", "error", "tier_unfilled"]


@fast_init
@dataclass(frozen=True)
class StepRecord:
    """The scheduler after one step: what was scheduled, its state, and the free blocks while
    the batch ran (where usage peaks)."""

    step: int
    scheduled: tuple[tuple[str, int], ...]
    state: SchedulerState
    free_blocks_while_running: int


@fast_init
@dataclass(frozen=True)
class RunTrace:
    """Everything one run (one pool size) produced."""

    pool: int
    steps: tuple[StepRecord, ...]
    stopped: StopReason
    message: str = ""  # the error, when stopped is "error"; why, when "tier_unfilled"
    unmet_expectation: str = ""  # the first step expectation that did not hold
    leak: str = ""  # the first block accounting violation
    # The first batch vLLM's model runner would refuse (adapters/runner_protocol.py).
    protocol: str = ""
    # The reservation in force when the run stopped (SchedulerHandle.reservation); None when
    # it could not be read (vLLM raised).
    reserved: int | None = None
    # Only where a picture is drawn (run/steps.py): each KV cache group's label, and after each
    # step the blocks it holds per request (the case's request order).
    groups: tuple[str, ...] = ()
    held: tuple[tuple[tuple[int, ...], ...], ...] = ()


@fast_init
@dataclass(frozen=True)
class Fit:
    """The fit in blocks, and the smallest pool in which some request, alone, is admitted:
    what its admission allocates (its load, or its first prefill chunk) and the null block.
    Reservation rules only ever keep more free, so no variant admits anything below it."""

    blocks: int
    admits_from: int
    # Each request's own fit, alone (in the case's request order).
    each: tuple[int, ...] = ()


@fast_init
@dataclass(frozen=True)
class Together:
    """Async loads a case expects in flight together at some step, at every pool from
    ``from_pool`` up (its ``concurrency:``, the pool resolved)."""

    loads: tuple[str, ...]
    from_pool: int
    exact: bool = False  # and never in flight together below ``from_pool`` (from the fit up)


@fast_init
@dataclass(frozen=True)
class CellRun:
    """A cell's runs: the case's fit and a trace per pool size swept, or why they stopped
    short (the case could not run at all, or the cell ran past its limit of CPU time)."""

    fit: int  # the smallest pool in which every request, alone, runs to completion
    fit_slack: int  # blocks of over-reservation the case tolerates (CaseFile.fit_slack)
    traces: tuple[RunTrace, ...]
    error: str = ""  # the case could not run (vLLM raised before any pool ran)
    timeout: str = ""  # where the cell's deadline passed, and the last state
    timeout_pool: int | None = None  # the pool running when it passed, if one was
    # The smallest pool the release's start-up sizing gives an engine serving these requests.
    startable: Startable = NOT_ASKED
    # The fit on that engine, where it starts below ``fit`` (its scheduler caps a request's
    # slots at the shorter ``max_model_len``): a pool from ``startable`` below this never
    # finishes a request the engine accepted. None: not asked, the case's fit stands.
    served_fit: int | None = None
    # Runs that never finished at a pool an engine can have, again on that engine
    # (run/served.py): a deadlock is one only where these fail too.
    served_traces: tuple[RunTrace, ...] = ()
    # Identifies the layout a described model ran with on this release (its derived groups), so
    # cells of releases that derive different layouts are never compared as equals.
    layout_digest: str = ""
    # The loads expected in flight together (matrix/judge/tightness.py judges them per pool).
    together: tuple[Together, ...] = ()
    # A stock cell's twin (run/twin.py): the variant its release ships, and its runs at the
    # pools of ``traces`` (matrix/judge/twin.py holds stock's decisions to them).
    twin: str = ""
    twin_traces: tuple[RunTrace, ...] = ()


@dataclass(frozen=True)
class StepMark:
    """Something a picture marks at a step: a request's load admitted (``admitted``), its
    load completed (``loaded``), its first scheduled step (``running``), a preemption
    (``preempted``), its end (``finished``); or, with no request, the step from which
    nothing changed any more (``stops``) or where vLLM raised (``error``)."""

    step: int
    what: str
    request: str = ""


@dataclass(frozen=True)
class PoolSteps:
    """One run's blocks, step by step, as a failing cell's picture draws them; recorded only
    for failing cells, at their first failing pool and at the fit (run/steps.py)."""

    pool: int
    groups: tuple[str, ...]  # each KV cache group's label
    requests: tuple[str, ...]
    free: tuple[int, ...]  # free blocks after each step
    held: tuple[tuple[tuple[int, ...], ...], ...]  # after each step: per group, per request
    marks: tuple[StepMark, ...]
    stopped: StopReason

    def to_dict(self) -> dict[str, Any]:
        """Compact JSON data: a step is one string, ``free:g0r0,g0r1;g1r0,g1r1`` (the free
        blocks, then each group's blocks per request), a mark ``"step what request"``."""
        steps = [
            f"{free}:" + ";".join(",".join(map(str, group)) for group in held)
            for free, held in zip(self.free, self.held, strict=True)
        ]
        marks = [f"{m.step} {m.what} {m.request}".rstrip() for m in self.marks]
        return {
            "pool": self.pool,
            "groups": list(self.groups),
            "requests": list(self.requests),
            "steps": steps,
            "marks": marks,
            "stopped": self.stopped,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PoolSteps:
        """The record :meth:`to_dict` wrote."""
        free, held = [], []
        for step in data["steps"]:
            count, _, groups = step.partition(":")
            free.append(int(count))
            rows = groups.split(";") if groups else []
            held.append(tuple(tuple(int(n) for n in row.split(",") if n) for row in rows))
        marks = []
        for mark in data["marks"]:
            step, what, *request = mark.split(" ", 2)
            marks.append(StepMark(int(step), what, request[0] if request else ""))
        return cls(
            data["pool"],
            tuple(data["groups"]),
            tuple(data["requests"]),
            tuple(free),
            tuple(held),
            tuple(marks),
            data["stopped"],
        )
