"""The engine a release starts for a case's requests alone (``max_model_len`` the longest
request's, :meth:`CaseFile.served`), asked where the case's own runs cannot stand for it.

A case runs at its own ``max_model_len`` (1024 by default), for which vLLM would start only
with far more blocks than the pools swept; an engine that has one of those pools is sized for
shorter requests, and its scheduler caps what a request asks at that length. So a failure at a
pool an engine can have counts only when that engine fails too: its fit is measured where it
starts below the case's fit (``sizer`` is judged against it), and a run that never finished
at a pool from the fit and the startable pool up is run again on it (a ``deadlock`` needs both).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from matrix.adapters.protocol import Startable, VersionAdapter
from matrix.case.format import CaseFile
from matrix.run.fit import measure_fit
from matrix.run.playback import CellTimeout, cell_clock
from matrix.run.pools import run_pool
from matrix.run.records import RunTrace
from matrix.run.variants import Variant


def served_fit(
    adapter: VersionAdapter,
    case: CaseFile,
    fit: int,
    startable: Startable,
    deadline: float = math.inf,
    clock: Callable[[], float] = cell_clock,
) -> int | None:
    """The fit on the served engine, asked only where it starts below ``fit``; None when not
    asked or not measurable (then the case's fit stands)."""
    if startable.blocks is None or startable.blocks >= fit:
        return None
    try:
        return measure_fit(adapter, case.served(), deadline, clock).blocks
    except CellTimeout:
        raise
    except Exception:
        return None


def served_reruns(
    adapter: VersionAdapter,
    case: CaseFile,
    variant: Variant | str,
    unfinished: Iterable[int],
    fit: int,
    startable: Startable,
    deadline: float = math.inf,
    clock: Callable[[], float] = cell_clock,
) -> tuple[RunTrace, ...]:
    """The ``unfinished`` pools from the fit and the startable pool up, run again on the
    served engine (none where the case already is that engine)."""
    if startable.blocks is None:
        return ()
    deployable = max(fit, startable.blocks)
    pools = [pool for pool in unfinished if pool >= deployable]
    if not pools:  # most cells: the served case is not even made
        return ()
    served = case.served()
    if served.max_model_len == case.max_model_len:
        return ()
    return tuple(run_pool(adapter, served, variant, pool, deadline, clock) for pool in pools)
