"""What the parent computes once before forking the mutants' children, so no child computes it
again: for the matrix's cells, each case's layout, start-up pool and engine configuration
(cached per process by the adapters). Not whether the release supports a case: for a tier
connector that runs a scheduler (``connectors.tier.never_loads``).

None of it may run the surface: the baseline runs this warm-up under coverage first, in its own
context, and the parent warms only when it reached no line of the surface's files (a warmed
value computed by stock code would hide a mutant).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import pytest


def warm(items: Sequence[pytest.Item]) -> None:
    """Fills the adapters' per-process caches for the matrix's cells among ``items``."""
    from matrix.adapters.config import vllm_config_for
    from matrix.adapters.selection import adapter_or_refusal
    from matrix.items import CellItem

    adapter = adapter_or_refusal()
    for item in items:
        if not isinstance(item, CellItem):
            continue
        definition = item.cell.case.definition
        with contextlib.suppress(Exception):  # the cell itself says what is wrong
            case = adapter.resolve(definition)
            adapter.startable(case)
            vllm_config_for(case, 1)
