"""vLLM 0.32 and 0.33: the margin per KV cache group ("fixed").

``_spec_decode_step_blocks`` is an int attribute set in ``__init__``: the sum over non-Mamba
groups of ceil(N / group block size). In-flight loads' remaining blocks pass ``full + N``
tokens through the coordinator, so each group counts its own speculative step.
"""

from __future__ import annotations

from typing import ClassVar

from vllm.v1.core.sched.scheduler import Scheduler

from matrix.adapters.handle import Handle
from matrix.adapters.requirements import SHARED_REQUIREMENTS, Requirement, init_assigns
from matrix.adapters.v0_31 import PREFILL_END, Vllm031, Vllm031Handle


class Vllm032Handle(Vllm031Handle):
    def stock_margin(self) -> int:
        return int(self.scheduler._spec_decode_step_blocks)

    def drop_stock_margin(self) -> None:
        self.scheduler._spec_decode_step_blocks = 0


class Vllm032(Vllm031):
    handle_type: ClassVar[type[Handle]] = Vllm032Handle
    requirements: ClassVar[tuple[Requirement, ...]] = (
        *SHARED_REQUIREMENTS,
        PREFILL_END,
        Requirement(
            "the int attribute Scheduler._spec_decode_step_blocks set in __init__ (0.32's margin)",
            lambda: (
                init_assigns("_spec_decode_step_blocks")
                and not callable(getattr(Scheduler, "_spec_decode_step_blocks", None))
            ),
        ),
    )
