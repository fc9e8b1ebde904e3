"""vLLM 0.31: the first speculative-decode margin ("original").

``Scheduler._spec_decode_step_blocks()`` is a method, ceil(N / scheduler block size); the
admission adds it once for the admitting request, and ``_request_remaining_blocks`` adds it
once per in-flight load. The coordinator takes ``prefill_end``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from matrix.adapters import surface
from matrix.adapters.handle import Handle
from matrix.adapters.requirements import (
    INDEXED_RUNNER_OUTPUT,
    SHARED_REQUIREMENTS,
    Requirement,
    required,
)
from matrix.adapters.v0_30 import Vllm030, Vllm030Handle


class Vllm031Handle(Vllm030Handle):
    """A scheduler of 0.31, whose margin is the ``_spec_decode_step_blocks()`` method."""

    def stock_margin(self) -> int:
        """0.31's margin: ``Scheduler._spec_decode_step_blocks()``."""
        return int(self.scheduler._spec_decode_step_blocks())

    def drop_stock_margin(self) -> None:
        """Makes this instance's ``_spec_decode_step_blocks()`` return 0."""
        self.scheduler._spec_decode_step_blocks = lambda: 0

    def coordinator_options(self, request: Any) -> dict[str, Any]:
        """``prefill_end``: the request's prompt, or all its tokens but the last if more."""
        return {"prefill_end": max(request.num_prompt_tokens, request.num_tokens - 1)}


PREFILL_END = required(surface.PREFILL_END)


class Vllm031(Vllm030):
    """The adapter for vLLM 0.31."""

    handle_type: ClassVar[type[Handle]] = Vllm031Handle
    requirements: ClassVar[tuple[Requirement, ...]] = (
        *SHARED_REQUIREMENTS,
        INDEXED_RUNNER_OUTPUT,
        PREFILL_END,
        required(surface.SPEC_MARGIN_METHOD),
    )
