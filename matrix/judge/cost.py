"""What a finished run cost, pool by pool: the steps until every request finished, the
preemptions, and each asynchronous load's admission step and how many steps it waited for it;
then a variant's cell against stock's, pool by pool. A variant that removes a stall may pay for
it in steps or preemptions where both finish: the verdict says nothing of that, this does.

Pure: from a run's trace, which records every step's request states. A cost travels in a cell's
record as one line of text a pool (``PoolCost.to_text``), so reports stay small and exact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from matrix.adapters.protocol import FINISHED, LOADING
from matrix.run.records import RunTrace

_LOAD = re.compile(r"([A-Za-z0-9_.-]+)@(\d+)\+(\d+)")


@dataclass(frozen=True)
class LoadWait:
    """An asynchronous load: its request, the step that admitted it, and the steps the
    request waited before that step."""

    request: str
    admitted: int
    waited: int


@dataclass(frozen=True)
class PoolCost:
    """A finished run at one pool: steps, preemptions, loads, and each request's completion
    (the steps from its arrival to its end, in the order the requests arrived)."""

    pool: int
    steps: int
    preemptions: int
    loads: tuple[LoadWait, ...] = ()
    completions: tuple[int, ...] = ()

    @property
    def mean_completion(self) -> float:
        """The requests' mean completion, in steps."""
        return sum(self.completions) / len(self.completions) if self.completions else 0.0

    @property
    def tail_completion(self) -> int:
        """The slowest tenth's completion: the 90th percentile, nearest rank."""
        ranked = sorted(self.completions)
        return ranked[max(0, -(-9 * len(ranked) // 10) - 1)] if ranked else 0

    @property
    def waited(self) -> int:
        """The steps every load waited, together."""
        return sum(load.waited for load in self.loads)

    def to_text(self) -> str:
        """``pool steps preemptions request@admitted+waited ... / completion ...``, e.g.
        ``13 9 0 a@1+0 b@4+3 / 6 9``."""
        loads = "".join(f" {w.request}@{w.admitted}+{w.waited}" for w in self.loads)
        done = " /" + "".join(f" {steps}" for steps in self.completions)
        return f"{self.pool} {self.steps} {self.preemptions}{loads}{done}"

    @classmethod
    def from_text(cls, text: str) -> PoolCost:
        """The cost :meth:`to_text` wrote; :class:`ValueError` for any other text."""
        head, slash, tail = text.partition(" /")
        completions = tuple(int(steps) for steps in tail.split()) if slash else ()
        pool, steps, preemptions, *loads = head.split(" ")
        waits = []
        for load in loads:
            matched = _LOAD.fullmatch(load)
            if matched is None:
                raise ValueError(f"{load[:40]!r} is not a load's request@admitted+waited")
            request, admitted, waited = matched.groups()
            waits.append(LoadWait(request, int(admitted), int(waited)))
        return cls(int(pool), int(steps), int(preemptions), tuple(waits), completions)


def pool_cost(trace: RunTrace) -> PoolCost | None:
    """The run's cost, when every request finished (None otherwise: the verdict judges it)."""
    if trace.stopped != "finished" or not trace.steps:
        return None
    # A request reaches the scheduler before the first step it is seen after.
    seen: dict[str, int] = {}
    admitted: dict[str, int] = {}
    finished: dict[str, int] = {}
    # A request's count as long as the scheduler held it: a finished request has left it,
    # and its record counts none.
    preempted: dict[str, int] = {}
    for record in trace.steps:
        for request in record.state.requests:
            seen.setdefault(request.request_id, record.step)
            if request.num_preemptions > preempted.get(request.request_id, 0):
                preempted[request.request_id] = request.num_preemptions
            if request.status == LOADING:
                admitted.setdefault(request.request_id, record.step)
            if request.status == FINISHED:
                finished.setdefault(request.request_id, record.step)
    last = trace.steps[-1]
    loads = tuple(LoadWait(name, step, step - seen[name]) for name, step in admitted.items())
    completions = tuple(finished[name] - seen[name] + 1 for name in seen if name in finished)
    return PoolCost(trace.pool, last.step, sum(preempted.values()), loads, completions)


def run_costs(traces: Sequence[RunTrace]) -> tuple[str, ...]:
    """A cell's costs as its record keeps them: a line for each pool whose run finished."""
    return tuple(cost.to_text() for t in traces if (cost := pool_cost(t)) is not None)


@dataclass(frozen=True)
class Difference:
    """A variant's cell against stock's at the pools both finished: the pools where it took
    more steps, fewer, preempted more, fewer, and its loads waited longer; the largest change
    of each (steps and preemptions: the variant's less stock's)."""

    compared: tuple[int, ...]
    slower: tuple[int, ...] = ()
    faster: tuple[int, ...] = ()
    more_preemptions: tuple[int, ...] = ()
    fewer_preemptions: tuple[int, ...] = ()
    longer_waits: tuple[int, ...] = ()
    most_steps: int = 0  # the largest increase in steps (0: none)
    least_steps: int = 0  # the largest decrease (0: none; negative otherwise)
    most_preemptions: int = 0

    @property
    def same(self) -> bool:
        """Whether the variant cost exactly what stock did wherever both finished."""
        return not (self.slower or self.faster or self.more_preemptions)


def difference(variant: Sequence[str], stock: Sequence[str]) -> Difference:
    """A variant's costs against stock's, pool by pool (a pool either left unfinished is not
    compared: a stall or a refusal is the verdict's to judge)."""
    theirs = {cost.pool: cost for cost in map(PoolCost.from_text, stock)}
    ours = {cost.pool: cost for cost in map(PoolCost.from_text, variant)}
    pools = tuple(sorted(ours.keys() & theirs.keys()))
    steps = {p: ours[p].steps - theirs[p].steps for p in pools}
    preempted = {p: ours[p].preemptions - theirs[p].preemptions for p in pools}
    waits = {p: ours[p].waited - theirs[p].waited for p in pools}
    return Difference(
        compared=pools,
        slower=tuple(p for p in pools if steps[p] > 0),
        faster=tuple(p for p in pools if steps[p] < 0),
        more_preemptions=tuple(p for p in pools if preempted[p] > 0),
        fewer_preemptions=tuple(p for p in pools if preempted[p] < 0),
        longer_waits=tuple(p for p in pools if waits[p] > 0),
        most_steps=max([0, *steps.values()]),
        least_steps=min([0, *steps.values()]),
        most_preemptions=max([0, *preempted.values()]),
    )
