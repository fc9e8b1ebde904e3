"""Stock's decisions against its twin's (``matrix.run.twin``): at every pool, each request
must reach each state (admitted as a load, promoted, running, preempted, finished) at the same
step under vLLM's own reservation code as under the rule its release ships. Pure: records only.
"""

from __future__ import annotations

from collections.abc import Iterator

from matrix.run.records import CellRun, RunTrace

# (request, its status) -> the first step after which it had it.
Decisions = dict[tuple[str, str], int]


def decisions(trace: RunTrace) -> Decisions:
    """When each request first reached each status in ``trace``."""
    first: Decisions = {}
    for record in trace.steps:
        for request in record.state.requests:
            first.setdefault((request.request_id, request.status), record.step)
    return first


def _never(step: int | None) -> str:
    return "never" if step is None else f"after step {step}"


def difference(trace: RunTrace, twin: RunTrace, twin_name: str) -> str | None:
    """The first decision ``trace`` makes otherwise than ``twin`` at the same pool, in words
    (the earliest step at which either reached a state the other did not then), or None."""
    ours, theirs = decisions(trace), decisions(twin)
    differing = [key for key in ours.keys() | theirs.keys() if ours.get(key) != theirs.get(key)]
    if not differing:
        return None

    def earliest(key: tuple[str, str]) -> tuple[int, str, str]:
        steps = [s for s in (ours.get(key), theirs.get(key)) if s is not None]
        return (min(steps), key[0], key[1])

    request, status = min(differing, key=earliest)
    return (
        f"pool {trace.pool}: {request} {status} {_never(ours.get((request, status)))}, "
        f"{_never(theirs.get((request, status)))} under {twin_name} (the rule this release "
        "ships, patched in)"
    )


def differing_pools(run: CellRun) -> Iterator[tuple[int, str]]:
    """Each pool where a stock cell decided otherwise than its twin, and how."""
    twins = {trace.pool: trace for trace in run.twin_traces}
    for trace in run.traces:
        twin = twins.get(trace.pool)
        if twin is None:
            continue
        found = difference(trace, twin, run.twin)
        if found is not None:
            yield trace.pool, found
