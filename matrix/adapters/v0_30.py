"""vLLM 0.30, the oldest supported release: no speculative-decode margin.

0.30 reserves, at an async-load admission, the blocks the other in-flight loads still need
for their full sequence, and nothing for the admitting request's speculative step. What the
releases share is in ``handle`` and ``probe``; later adapters subclass these two classes.
"""

from __future__ import annotations

from typing import Any, ClassVar

from matrix.adapters.config import async_refusal, runner_refusal, scheduler_settings
from matrix.adapters.connectors import family_of
from matrix.adapters.connectors.tier import never_loads, tier_shortfall
from matrix.adapters.construction import refused_when_built
from matrix.adapters.engine_options import has_two_runners
from matrix.adapters.handle import Handle
from matrix.adapters.kv_cache import case_groups, with_layout
from matrix.adapters.layout import LayoutError
from matrix.adapters.protocol import Startable
from matrix.adapters.requirements import (
    INDEXED_RUNNER_OUTPUT,
    SHARED_REQUIREMENTS,
    Requirement,
    missing_connector_options,
    missing_scheduler_settings,
    release_failure_policies,
    release_has_bounded_replay,
    release_mamba_modes,
    required,
)
from matrix.adapters.startup import startable
from matrix.adapters.surface import NO_SPEC_MARGIN
from matrix.case.format import CaseFile


class Vllm030Handle(Handle):
    """A scheduler of 0.30, which keeps no speculative-decode margin."""

    def stock_margin(self) -> int:
        """0: 0.30 keeps no block free for the admitting request's speculative step."""
        return 0

    def drop_stock_margin(self) -> None:
        """Nothing to turn off: 0.30 has no stock margin."""
        pass

    def coordinator_options(self, request: Any) -> dict[str, Any]:
        """No arguments: 0.30's ``get_num_blocks_to_allocate`` takes no release-specific ones."""
        return {}


class Vllm030:
    """The adapter for vLLM 0.30, and the base of the later releases' adapters."""

    handle_type: ClassVar[type[Handle]] = Vllm030Handle
    requirements: ClassVar[tuple[Requirement, ...]] = (
        *SHARED_REQUIREMENTS,
        INDEXED_RUNNER_OUTPUT,
        required(NO_SPEC_MARGIN),
    )

    def __init__(self, release: str) -> None:
        self.release = release

    def build(self, case: CaseFile, pool: int) -> Handle:
        """A scheduler of this release (``handle_type``) for ``case`` with ``pool`` blocks; where
        a request that warms its tier could not run there, whether the tier holds less than
        the case says (``tier_unfilled``)."""
        handle = self.handle_type(case, pool)
        if handle.warming_cut:
            handle.tier_unfilled = tier_shortfall(self.handle_type, case, pool, handle.warming_cut)
        return handle

    def startable(self, case: CaseFile) -> Startable:
        """The smallest pool this release's start-up sizing gives an engine serving ``case``'s
        requests (``startup``: vLLM's own check and block count)."""
        return startable(case)

    def resolve(self, case: CaseFile) -> CaseFile:
        """The case with its groups: a described model's, derived by this vLLM."""
        return with_layout(case)

    def lacks(self, case: CaseFile) -> str | None:
        """What ``case`` asks of vLLM that this release does not have (a scheduler setting,
        a Mamba cache mode, a load-failure policy, async scheduling for its speculative
        method), or None: its cells cannot run here because of the release's age, which is
        no fault of the case (a run whose every cell of it is so is not failed for it)."""
        missing = missing_scheduler_settings(scheduler_settings(case))
        if missing:
            return f"vLLM {self.release} has no scheduler setting {', '.join(missing)}"
        options = case.connector_options.model_dump(exclude_none=True)
        unread = missing_connector_options(case.connector, options)
        if unread:
            named = ", ".join(unread)
            return f"vLLM {self.release}'s {case.connector} connector has no option {named}"
        if case.engine.model_runner == "v1" and not has_two_runners():
            return (
                f"vLLM {self.release} has one model runner, which takes a preempted request "
                "back as new: no V1 runner (engine.model_runner v1) to send batches to"
            )
        refusal = runner_refusal(case)
        if refusal:
            return (
                f"vLLM {self.release} cannot run model runner {case.engine.model_runner} "
                f"here: {refusal}"
            )
        policy = case.engine.kv_load_failure_policy
        policies = release_failure_policies()
        if policy is not None and policy not in policies:
            return (
                f"vLLM {self.release} has no kv_load_failure_policy '{policy}' "
                f"(it has: {', '.join(policies) or 'none'})"
            )
        try:
            groups = case_groups(case)
        except LayoutError:
            return None  # unsupported() says why: not something the release lacks
        modes = release_mamba_modes()
        for group in groups:
            if group.kind == "mamba" and group.mamba_mode not in modes:
                return (
                    f"vLLM {self.release} has no Mamba cache mode '{group.mamba_mode}' "
                    f"(it has: {', '.join(modes)})"
                )
        if any(group.bounded_replay for group in groups) and not release_has_bounded_replay():
            return f"vLLM {self.release} has no bounded replay (a sliding_window's bounded_replay)"
        refusal = async_refusal(case)
        if refusal:
            return f"vLLM {self.release} cannot schedule this case asynchronously: {refusal}"
        return None

    def unsupported(self, case: CaseFile) -> str | None:
        """Why this release cannot run ``case`` (what it :meth:`lacks`, a layout it cannot
        derive, a connector that refuses the case, a tier connector that would load nothing),
        or None."""
        try:
            groups = case_groups(case)
        except LayoutError as error:
            return f"vLLM {self.release} cannot derive model {case.model}'s layout: {error}"
        lacking = self.lacks(case)
        if lacking:
            return lacking
        derived = case.model_copy(update={"groups": groups})
        refused = family_of(case).unsupported(derived) or refused_when_built(derived)
        if refused:
            return f"{refused} (vLLM {self.release})"
        silent = never_loads(self.build, self.resolve(case))
        if silent:
            return f"{silent} (vLLM {self.release})"
        return None
