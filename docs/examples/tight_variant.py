"""An example of your own reservation variant: ``--matrix-variant docs/examples/tight_variant.py:TIGHT``.

The shipped fix (``fixed``) keeps ceil(N / block size) blocks free per non-Mamba group for the
admitting request's first speculative step, whatever its prompt's alignment: an upper bound.
This rule counts only the blocks the next N tokens really need in each group given where the
prompt ends: ceil((prompt + N) / B) - ceil(prompt / B), which is 0 when the prompt leaves
room for N more tokens in its last block. In-flight loads keep what ``fixed`` keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

from matrix.adapters.protocol import Geometry, SchedulerHandle
from matrix.run.variants import ceil_div


def blocks_for_next_tokens(geometry: Geometry, prompt_tokens: int) -> int:
    """Blocks the N tokens after the prompt need, summed over non-Mamba groups (Mamba groups
    account for their speculative state themselves)."""
    n = geometry.spec_step_tokens
    return sum(
        ceil_div(prompt_tokens + n, group.block_size) - ceil_div(prompt_tokens, group.block_size)
        for group in geometry.groups
        if not group.is_mamba
    )


@dataclass(frozen=True)
class Tight:
    name: str = "tight"

    def apply(self, handle: SchedulerHandle) -> None:
        geometry = handle.geometry()
        handle.install_reservation(
            admission_margin=0,
            per_request_margin=0,
            spec_tokens_through_coordinator=True,
            admission_margin_for=lambda prompt: blocks_for_next_tokens(geometry, prompt),
        )


TIGHT = Tight()
