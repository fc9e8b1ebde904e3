"""The KV connectors a case's loads go through, one family a module behind
``base.ConnectorFamily`` (its config, the worker's reports, the tier's contents, what it
cannot do), chosen by the case's ``connector:`` (docs/connectors.md)."""

from __future__ import annotations

from matrix.adapters.connectors.base import ConnectorFamily
from matrix.adapters.connectors.mooncake_store import MooncakeStore
from matrix.adapters.connectors.multi import Multi
from matrix.adapters.connectors.offloading import Offloading
from matrix.adapters.connectors.prefill import MOONCAKE, MORIIO, NIXL, NIXL_PUSH
from matrix.adapters.connectors.simple_cpu import SimpleCPUOffload
from matrix.case.format import CaseFile

_SINGLE: dict[str, ConnectorFamily] = {
    family.name: family
    for family in (
        NIXL,
        NIXL_PUSH,
        MOONCAKE,
        MORIIO,
        Offloading(),
        SimpleCPUOffload(),
        MooncakeStore(),
    )
}
FAMILIES: dict[str, ConnectorFamily] = {**_SINGLE, "multi": Multi(_SINGLE)}


def family_of(case: CaseFile) -> ConnectorFamily:
    """The connector family of the case's ``connector:``."""
    return FAMILIES[case.connector]
