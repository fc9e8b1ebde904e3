"""vLLM 0.30, the oldest supported release: no speculative-decode margin.

0.30 reserves, at an async-load admission, the blocks the other in-flight loads still need
for their full sequence, and nothing for the admitting request's speculative step. What the
releases share is in ``handle`` and ``probe``; later adapters subclass these two classes.
"""

from __future__ import annotations

from typing import Any, ClassVar

from vllm.v1.core.sched.scheduler import Scheduler

from matrix.adapters.config import async_refusal, case_groups, with_layout
from matrix.adapters.handle import Handle
from matrix.adapters.layout import LayoutError
from matrix.adapters.requirements import (
    SHARED_REQUIREMENTS,
    Requirement,
    init_assigns,
    release_failure_policies,
    release_mamba_modes,
)
from matrix.case.format import CaseFile


class Vllm030Handle(Handle):
    def stock_margin(self) -> int:
        return 0

    def drop_stock_margin(self) -> None:
        pass

    def coordinator_options(self, request: Any) -> dict[str, Any]:
        return {}


class Vllm030:
    handle_type: ClassVar[type[Handle]] = Vllm030Handle
    requirements: ClassVar[tuple[Requirement, ...]] = (
        *SHARED_REQUIREMENTS,
        Requirement(
            "an admission with no speculative-decode margin (0.30's; with "
            "Scheduler._spec_decode_step_blocks a later adapter applies)",
            lambda: (
                not hasattr(Scheduler, "_spec_decode_step_blocks")
                and not init_assigns("_spec_decode_step_blocks")
            ),
        ),
    )

    def __init__(self, release: str) -> None:
        self.release = release

    def build(self, case: CaseFile, pool: int) -> Handle:
        return self.handle_type(case, pool)

    def resolve(self, case: CaseFile) -> CaseFile:
        return with_layout(case)

    def unsupported(self, case: CaseFile) -> str | None:
        try:
            groups = case_groups(case)
        except LayoutError as error:
            return f"vLLM {self.release} cannot derive model {case.model}'s layout: {error}"
        modes = release_mamba_modes()
        for group in groups:
            if group.kind == "mamba" and group.mamba_mode not in modes:
                return (
                    f"vLLM {self.release} has no Mamba cache mode '{group.mamba_mode}' "
                    f"(it has: {', '.join(modes)})"
                )
        refusal = async_refusal(case)
        if refusal:
            return f"vLLM {self.release} cannot schedule this case asynchronously: {refusal}"
        policy = case.engine.kv_load_failure_policy
        policies = release_failure_policies()
        if policy is not None and policy not in policies:
            return (
                f"vLLM {self.release} has no kv_load_failure_policy '{policy}' "
                f"(it has: {', '.join(policies) or 'none'})"
            )
        return None
