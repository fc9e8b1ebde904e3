"""Turns a case file into concrete cells: matrix axes x variants, with stable readable ids.

Pure: no vLLM, no pytest. ``single_group.yaml`` with an axis ``k`` over ``[1, 3]`` gives the
cases ``single_group[k=1]`` and ``single_group[k=3]``, and each of those one cell per variant,
``single_group[k=1]-original`` and so on. Ids depend only on the file's text.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matrix.loader import CaseFileError, LoadedDocument, Location, read_document, validate
from matrix.schema import Axis, CaseFile, Expectation


@dataclass(frozen=True)
class Case:
    """One point of a case file's matrix, validated."""

    case_id: str
    source: Path
    line: int
    spec: CaseFile

    @property
    def column(self) -> str | None:
        return self.spec.column


@dataclass(frozen=True)
class CellSpec:
    """A case run under one reservation variant: one test, one cell of the results table."""

    case: Case
    variant: str
    expected: Expectation

    @property
    def test_id(self) -> str:
        return f"{self.case.case_id}-{self.variant}"


def _axis_points(name: str, axis: Axis, document: LoadedDocument) -> list[tuple[str, Any]]:
    if isinstance(axis.values, dict):
        return [(str(label), value) for label, value in axis.values.items()]
    points = []
    for index, value in enumerate(axis.values):
        if isinstance(value, dict | list):
            line = document.line_of(("matrix", name, "values", index))
            raise CaseFileError(
                document.path,
                line,
                f"matrix.{name}: structured values need labels (values: {{label: value, ...}})",
            )
        points.append((str(value).lower() if isinstance(value, bool) else str(value), value))
    return points


def _path_parts(dotted: str) -> Location:
    return tuple(int(part) if part.isdigit() else part for part in dotted.split("."))


def _assign(data: dict[str, Any], dotted: str) -> tuple[Any, str | int]:
    """The container and key that ``dotted`` names in ``data``."""
    parts = _path_parts(dotted)
    node: Any = data
    for part in parts[:-1]:
        if isinstance(node, dict):
            node = node.setdefault(part, {})
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            raise KeyError(dotted)
    if isinstance(node, list) and not (isinstance(parts[-1], int) and parts[-1] < len(node)):
        raise KeyError(dotted)
    if not isinstance(node, dict | list):
        raise KeyError(dotted)
    return node, parts[-1]


def expand_document(document: LoadedDocument) -> list[Case]:
    base = validate(document)
    if not base.matrix:
        return [Case(base.name, document.path, document.line_of(("name",)), base)]
    axes = list(base.matrix.items())
    cases = []
    for combination in itertools.product(*(_axis_points(n, a, document) for n, a in axes)):
        data = copy.deepcopy(document.data)
        del data["matrix"]
        for (name, axis), (_, value) in zip(axes, combination, strict=True):
            for path, item in axis.overlays(value).items():
                try:
                    container, key = _assign(data, path)
                except KeyError:
                    line = document.line_of(("matrix", name))
                    raise CaseFileError(
                        document.path, line, f"matrix.{name}: no such place in the case: {path}"
                    ) from None
                container[key] = copy.deepcopy(item)
        labels = ",".join(
            f"{name}={label}" for (name, _), (label, _) in zip(axes, combination, strict=True)
        )
        try:
            spec = validate(document, data)
        except CaseFileError as error:
            raise CaseFileError(error.path, error.line, f"[{labels}] {error.message}") from None
        cases.append(
            Case(f"{base.name}[{labels}]", document.path, document.line_of(("name",)), spec)
        )
    return cases


def cells_for_case(case: Case) -> list[CellSpec]:
    return [
        CellSpec(case, variant, case.spec.expectation_for(variant))
        for variant in case.spec.variants
    ]


def cells_from_file(path: Path) -> list[CellSpec]:
    """All cells of one case file, in a stable order. Raises :class:`CaseFileError`."""
    document = read_document(path)
    return [cell for case in expand_document(document) for cell in cells_for_case(case)]
