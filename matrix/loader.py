"""Reads case files: YAML (safe) with line numbers, validated into :class:`CaseFile`.

Every problem becomes a :class:`CaseFileError` whose text is one line, ``file:line: message``,
so a bad file is reported where it is wrong and never as a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from matrix.schema import CaseFile, PlacedError
from matrix.variant_names import VARIANT_NAMES, variant_context

Location = tuple[str | int, ...]


class CaseFileError(Exception):
    def __init__(self, path: Path, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line
        self.message = message


@dataclass(frozen=True)
class LoadedDocument:
    """A case file's plain data and the line of every key and item in it."""

    path: Path
    data: Any
    lines: dict[Location, int]

    def line_of(self, location: Location) -> int:
        """The line of the deepest part of ``location`` that exists in the file."""
        for end in range(len(location), -1, -1):
            line = self.lines.get(location[:end])
            if line is not None:
                return line
        return 1


def _plain(
    loader: yaml.SafeLoader,
    node: yaml.Node,
    where: Location,
    lines: dict[Location, int],
    path: Path,
) -> Any:
    lines[where] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)  # resolves YAML merge keys (<<: *anchor)
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int):
                raise CaseFileError(path, key_node.start_mark.line + 1, "keys must be plain names")
            if key in mapping:
                raise CaseFileError(path, key_node.start_mark.line + 1, f"duplicate key '{key}'")
            mapping[key] = _plain(loader, value_node, (*where, key), lines, path)
            lines[(*where, key)] = key_node.start_mark.line + 1
        return mapping
    if isinstance(node, yaml.SequenceNode):
        return [
            _plain(loader, item, (*where, index), lines, path)
            for index, item in enumerate(node.value)
        ]
    return loader.construct_object(node, deep=True)


def read_document(path: Path) -> LoadedDocument:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CaseFileError(path, 1, f"cannot read: {error}") from None
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            raise CaseFileError(path, 1, "the file is empty")
        lines: dict[Location, int] = {}
        data = _plain(loader, root, (), lines, path)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise CaseFileError(path, line, f"invalid YAML: {error.problem or error}") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise CaseFileError(path, lines[()], "a case file is a mapping (name:, groups:, ...)")
    return LoadedDocument(path, data, lines)


def data_location(data: Any, pydantic_location: tuple[int | str, ...]) -> Location:
    """Drops the union-member names pydantic inserts, keeping the path that exists in ``data``."""
    kept: list[str | int] = []
    node = data
    for part in pydantic_location:
        in_mapping = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if not (in_mapping or in_list):
            continue
        node = node[part]
        kept.append(part)
    return tuple(kept)


def describe_validation_error(
    error: ValidationError,
    document: LoadedDocument,
    data: Any,
    axis_lines: dict[Location, int] | None = None,
) -> CaseFileError:
    """One line for a validation error. ``axis_lines`` maps places of ``data`` that a matrix
    axis wrote to the line of that axis value, so errors there point at the axis, not the base."""
    problems = []
    for problem in error.errors(include_url=False):
        location = data_location(data, problem["loc"])
        placed = problem.get("ctx", {}).get("error")
        if isinstance(placed, PlacedError):
            location = data_location(data, placed.location)
        problems.append((location, problem))
    # Union members each report why they did not match: keep one problem per place, preferring
    # a failed rule (value_error) to a type mismatch.
    best: dict[Location, ErrorDetails] = {}
    for location, problem in problems:
        kept = best.get(location)
        if kept is None or (problem["type"] == "value_error" and kept["type"] != "value_error"):
            best[location] = problem
    # The deepest place first: it is the most specific.
    ordered = sorted(best.items(), key=lambda item: -len(item[0]))
    location = ordered[0][0]
    line = document.line_of(location)
    for prefix, axis_line in (axis_lines or {}).items():
        if location[: len(prefix)] == prefix:
            line = axis_line
    messages = [
        f"{'.'.join(str(p) for p in where) or 'case'}: "
        f"{problem['msg'].removeprefix('Value error, ')}"
        for where, problem in ordered
    ]
    return CaseFileError(document.path, line, "; ".join(messages))


def validate(
    document: LoadedDocument,
    data: Any | None = None,
    axis_lines: dict[Location, int] | None = None,
    variants: tuple[str, ...] = VARIANT_NAMES,
) -> CaseFile:
    """Validates ``data`` (the document's own, or an expanded copy of it) as a case whose
    ``expect`` and ``variants`` may name any of ``variants``."""
    payload = document.data if data is None else data
    try:
        return CaseFile.model_validate(payload, context=variant_context(variants))
    except ValidationError as error:
        raise describe_validation_error(error, document, payload, axis_lines) from None


def load_case_file(path: Path) -> tuple[LoadedDocument, CaseFile]:
    document = read_document(path)
    return document, validate(document)
