"""What a connector's scheduler side refuses when vLLM builds it for a case (MoRIIO's WRITE
mode: sliding-window groups, Mamba groups on 0.30-0.32, speculative methods but DSpark with
Mamba on 0.33): the case is unsupported with vLLM's own message. It builds the case's
blueprint, so it sits above it, not among the connector families the blueprint reads."""

from __future__ import annotations

from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
from vllm.v1.kv_cache_interface import KVCacheConfig

from matrix.adapters.blueprint import blueprint
from matrix.adapters.connectors import family_of
from matrix.adapters.connectors.multi import Multi
from matrix.adapters.connectors.prefill import PrefillFamily
from matrix.case.format import CaseFile


def refused_when_built(case: CaseFile) -> str | None:
    """The first refusal, when built, of the case's connector (or of a MultiConnector's child)
    whose family names the errors that mean a refusal; None when none refuses."""
    family = family_of(case)
    members = family.children(case) if isinstance(family, Multi) else [family]
    for member in members:
        if isinstance(member, PrefillFamily) and member.refusals:
            reason = construction_refusal(case, member.vllm_name, member.refusals)
            if reason:
                return (
                    reason
                    if member is family
                    else f"MultiConnector's child {member.name}: {reason}"
                )
    return None


# A case's refusal by a connector's scheduler side, per case (its JSON): building one costs
# a config and the connector, and every cell of a case asks.
_refusals: dict[str, str | None] = {}


def construction_refusal(case: CaseFile, vllm_name: str, refusals: tuple[str, ...]) -> str | None:
    """Builds the case's connector scheduler side alone, by vLLM's factory, as the scheduler
    builds it: vLLM's own message if it raises one of ``refusals``, else None."""
    key = case.model_dump_json()
    if key not in _refusals:
        plan = blueprint(case)
        kv_cache_config = KVCacheConfig(
            num_blocks=2, kv_cache_tensors=[], kv_cache_groups=list(plan.groups)
        )
        reason = None
        try:
            KVConnectorFactory.create_connector(
                config=plan.config, role=KVConnectorRole.SCHEDULER, kv_cache_config=kv_cache_config
            )
        except Exception as error:  # its own refusals; anything else the cell's run reports
            if type(error).__name__ in refusals:
                reason = f"{vllm_name}'s scheduler side refuses this case: {error}"
        _refusals[key] = reason
    return _refusals[key]
