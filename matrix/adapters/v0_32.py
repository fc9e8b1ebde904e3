"""vLLM 0.32 and 0.33: the margin per KV cache group ("fixed").

``_spec_decode_step_blocks`` is an int attribute set in ``__init__``: the sum over non-Mamba
groups of ceil(N / group block size). In-flight loads' remaining blocks pass ``full + N``
tokens through the coordinator, so each group counts its own speculative step.
"""

from __future__ import annotations

from typing import ClassVar

from matrix.adapters.handle import Handle
from matrix.adapters.requirements import (
    INDEXED_RUNNER_OUTPUT,
    SHARED_REQUIREMENTS,
    Requirement,
    required,
)
from matrix.adapters.surface import SPEC_MARGIN_ATTRIBUTE
from matrix.adapters.v0_31 import PREFILL_END, Vllm031, Vllm031Handle


class Vllm032Handle(Vllm031Handle):
    """A scheduler of 0.32 or 0.33: its margin is the attribute ``_spec_decode_step_blocks``."""

    def stock_margin(self) -> int:
        """0.32's margin: the ``_spec_decode_step_blocks`` attribute."""
        return int(self.scheduler._spec_decode_step_blocks)

    def drop_stock_margin(self) -> None:
        """Sets this instance's ``_spec_decode_step_blocks`` to 0."""
        self.scheduler._spec_decode_step_blocks = 0


SPEC_STEP_ATTRIBUTE = required(SPEC_MARGIN_ATTRIBUTE)


class Vllm032(Vllm031):
    """The adapter for vLLM 0.32 and 0.33."""

    handle_type: ClassVar[type[Handle]] = Vllm032Handle
    requirements: ClassVar[tuple[Requirement, ...]] = (
        *SHARED_REQUIREMENTS,
        INDEXED_RUNNER_OUTPUT,
        PREFILL_END,
        SPEC_STEP_ATTRIBUTE,
    )
