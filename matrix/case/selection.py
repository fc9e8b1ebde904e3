"""Which cells a run keeps by what they run (``--connector``, ``--model``, ``--architecture``
of ``python -m matrix run`` and ``connectors``): exact names, where ``-k`` matches any part of a
test id (``-k nixl`` also selects ``nixl_push``). Pure.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command line reads FILTER_OPTIONS before anything heavier is imported
    from matrix.case.expansion import Cell

# Each filter's option (``--connector``; the plugin's ``--matrix-connector``) and whom it keeps.
FILTER_OPTIONS = (
    ("connector", "whose loads go through this connector (exact: nixl is not nixl_push)"),
    ("model", "of this model file (a case's model:, e.g. llama-3.1-8b)"),
    ("architecture", "of a model of this architecture (e.g. LlamaForCausalLM)"),
)


class SelectionError(ValueError):
    """A filter names what no cell can run (a connector the axis lacks); one line."""


@dataclass(frozen=True)
class CellFilter:
    """The names a run keeps, each list empty when it keeps every cell by that."""

    connectors: tuple[str, ...] = ()
    models: tuple[str, ...] = ()  # a case's ``model:`` (the model file's name)
    architectures: tuple[str, ...] = ()  # the model's class, as vLLM's registry knows it

    def __post_init__(self) -> None:
        from matrix.case.connector import CONNECTOR_NAMES

        for name in self.connectors:
            if name not in CONNECTOR_NAMES:
                guess = difflib.get_close_matches(name, CONNECTOR_NAMES, n=1)
                hint = f"did you mean {guess[0]}? " if guess else ""
                raise SelectionError(
                    f"--connector {name!r:.60}: no such connector ({hint}the connectors: "
                    f"{', '.join(CONNECTOR_NAMES)})"
                )

    def keeps(self, cell: Cell) -> bool:
        """Whether the cell runs what every given list names one of."""
        from matrix.case.connector import DEFAULT_CONNECTOR

        case = cell.case.definition
        described = case.described
        architecture = described.architecture if described is not None else None
        return (
            (not self.connectors or (case.connector or DEFAULT_CONNECTOR) in self.connectors)
            and (not self.models or case.model in self.models)
            and (not self.architectures or architecture in self.architectures)
        )

    def words(self) -> str:
        """The filter as its options are written (``--connector offloading``), "" for none."""
        given = (self.connectors, self.models, self.architectures)
        return " ".join(
            f"--{option} {name}"
            for (option, _), names in zip(FILTER_OPTIONS, given, strict=True)
            for name in names
        )


def selection_words(cell_filter: CellFilter, keyword: str, markers: str) -> str:
    """How a run was narrowed, as its options read (``--connector offloading -k k1``), "" for
    a whole run: what its reports say they hold."""
    narrowed: Sequence[str] = (
        cell_filter.words(),
        f"-k {keyword}" if keyword else "",
        f"-m {markers}" if markers else "",
    )
    return " ".join(part for part in narrowed if part)
