"""A scheduler's requests read as the plain records the harness keeps after every step.

A run reads the state after every step, and most steps change one request or none, so the
reader makes a request's record anew only when something in it changed, and returns the
previous state itself when nothing did: the records are frozen, so sharing them is safe, and
the stuck rule then compares identical objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from matrix.adapters.protocol import FINISHED, RequestState, SchedulerState, Status

# What a request's record is made from: vLLM's status (None once it left the scheduler),
# computed tokens, load reported, preemptions.
_Reading = tuple[Any, int, bool, int]


class StateReader:
    """Reads one scheduler's requests into a :class:`SchedulerState`, reusing the records
    of requests that did not change since the last read."""

    def __init__(self, words: Mapping[Any, Status]) -> None:
        self._words = words  # every vLLM status in the verdict's words
        self._records: dict[str, tuple[_Reading, RequestState]] = {}
        self._last: SchedulerState | None = None

    def read(
        self,
        request_ids: Iterable[str],
        request_of: Callable[[str], Any],
        reported: Callable[[str], bool],
        free_blocks: int,
    ) -> SchedulerState:
        """The state of ``request_ids`` (finished once ``request_of`` gives no vLLM request for
        one: finished requests leave the scheduler), which loads were ``reported`` done, and
        the free blocks."""
        records = self._records
        states: list[RequestState] = []
        changed = False
        for request_id in request_ids:
            request = request_of(request_id)
            done = reported(request_id)
            reading: _Reading = (
                (None, 0, done, 0)
                if request is None
                else (request.status, request.num_computed_tokens, done, request.num_preemptions)
            )
            known = records.get(request_id)
            if known is None or known[0] != reading:
                if request is None:  # finished requests leave the scheduler
                    record = RequestState(request_id, FINISHED, 0, done, 0)
                else:
                    status = self._words[request.status]
                    computed, preemptions = request.num_computed_tokens, request.num_preemptions
                    record = RequestState(request_id, status, computed, done, preemptions)
                known = records[request_id] = (reading, record)
                changed = True
            states.append(known[1])
        read = tuple(states)
        last = self._last
        # Unchanged records are the same objects: comparing the tuples is cheap.
        if changed or last is None or last.free_blocks != free_blocks or last.requests != read:
            last = self._last = SchedulerState(read, free_blocks)
        return last
