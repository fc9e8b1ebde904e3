"""Reads case files: YAML (safe) with line numbers, validated into :class:`CaseFile`.

Every problem becomes a :class:`CaseFileError` whose text is one line, ``file:line: message``,
so a bad file is reported where it is wrong and never as a traceback. Reading is bounded
(matrix/limits.py) before anything is built: the file's size, how deep it nests and how large
its aliases make it (an alias bomb is a few lines that expand to billions of values).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from matrix.limits import MAX_DEPTH, MAX_FILE_BYTES, MAX_VALUES
from matrix.model_schema import ModelDescription, description_path
from matrix.schema import CaseFile, PlacedError
from matrix.variant_names import VARIANT_NAMES, variant_context

Location = tuple[str | int, ...]

# Tags a plain-data document resolves to; any other (!!python/..., !!set, !custom) is refused.
PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}"
    for name in ("null", "bool", "int", "float", "str", "timestamp", "map", "seq", "merge")
)


def one_line(text: str) -> str:
    """``text`` with control characters escaped: a message must stay on its line whatever a
    file's keys or values contain."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class CaseFileError(Exception):
    def __init__(self, path: Path, line: int, message: str) -> None:
        message = one_line(message)
        super().__init__(f"{one_line(str(path))}:{line}: {message}")
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


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing nesting deeper than :data:`MAX_DEPTH` while it composes
    (its composer recurses per level, so a deep file would end in a RecursionError)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                message = f"nested deeper than {MAX_DEPTH} levels"
                raise yaml.composer.ComposerError(None, None, message, mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _check_expansion(path: Path, root: yaml.Node) -> None:
    """Refuses a node graph whose expansion is too large, too deep or endless, and tags that
    are not plain data. Aliases share nodes, so sizes are memoised per node: this costs one
    visit per node written, however large the expansion would be."""
    measured: dict[int, tuple[int, int]] = {}  # id(node) -> (values, depth) once expanded
    entered: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if children_done:  # post-order: the smallest value over a limit is the one named
            sizes = [measured[id(child)] for child in _children(node)]
            size, depth = 1 + sum(s for s, _ in sizes), 1 + max((d for _, d in sizes), default=0)
            measured[id(node)] = (size, depth)
            if size > MAX_VALUES:
                message = f"expands to {size:,} values, over the limit of {MAX_VALUES:,}"
                raise CaseFileError(path, _line(node), f"{message} (an alias bomb?)")
            if depth > MAX_DEPTH:
                message = f"aliases nest this deeper than {MAX_DEPTH} levels"
                raise CaseFileError(path, _line(node), message)
        elif id(node) in entered and id(node) not in measured:  # an ancestor of itself
            raise CaseFileError(path, _line(node), "an alias refers to a node that contains it")
        elif node.tag not in PLAIN_TAGS:
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            message = f"tag '{tag}' is not allowed: a case file is plain data"
            raise CaseFileError(path, _line(node), message)
        elif id(node) not in entered:
            entered.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(_children(node)))


def _construct(loader: yaml.SafeLoader, node: yaml.Node, path: Path) -> Any:
    try:
        return loader.construct_object(node, deep=True)
    except (ValueError, OverflowError) as error:  # a 5,000-digit int, a 13th month, ...
        raise CaseFileError(path, _line(node), f"unreadable value: {error}") from None


def _plain(
    loader: yaml.SafeLoader,
    node: yaml.Node,
    where: Location,
    lines: dict[Location, int],
    path: Path,
) -> Any:
    lines[where] = _line(node)
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)  # resolves YAML merge keys (<<: *anchor)
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _construct(loader, key_node, path)
            if not isinstance(key, str | int):
                raise CaseFileError(path, _line(key_node), "keys must be plain names")
            if key in mapping:
                raise CaseFileError(path, _line(key_node), f"duplicate key '{key}'")
            mapping[key] = _plain(loader, value_node, (*where, key), lines, path)
            lines[(*where, key)] = _line(key_node)
        return mapping
    if isinstance(node, yaml.SequenceNode):
        return [
            _plain(loader, item, (*where, index), lines, path)
            for index, item in enumerate(node.value)
        ]
    return _construct(loader, node, path)


def _read_text(path: Path) -> str:
    """The file as text, refusing what is not a regular UTF-8 file of a bounded size."""
    try:
        # Non-blocking, so a FIFO named like a case file is refused rather than waited on.
        with open(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as file:
            mode = os.fstat(file.fileno()).st_mode
            if not stat.S_ISREG(mode):  # (a directory raised already, when opened)
                raise CaseFileError(path, 1, "cannot read: not a regular file (a FIFO? a device?)")
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise CaseFileError(path, 1, f"cannot read: {error.strerror or error}") from None
    if len(data) > MAX_FILE_BYTES:
        raise CaseFileError(path, 1, f"larger than {MAX_FILE_BYTES:,} bytes, the limit for a case")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        message = f"not UTF-8 text: byte 0x{data[error.start]:02x} cannot be decoded"
        raise CaseFileError(path, line, message) from None


def _yaml_problem(error: yaml.YAMLError, text: str) -> tuple[int, str]:
    """The line and one-line message of any PyYAML error."""
    if isinstance(error, yaml.reader.ReaderError):
        line = text.count("\n", 0, error.position) + 1
        code = ord(error.character) if isinstance(error.character, str) else error.character
        return line, (
            f"character U+{code:04X} is not allowed in YAML "
            "(control characters other than tab and newline are not)"
        )
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        parts = [error.context, error.problem]
        if error.context and error.context_mark and error.context_mark is not mark:
            parts[0] = f"{error.context} (line {error.context_mark.line + 1})"
        message = "; ".join(p for p in parts if p) or type(error).__name__
        return (mark.line + 1 if mark is not None else 1), message
    return 1, str(error) or type(error).__name__


def read_document(path: Path) -> LoadedDocument:
    text = _read_text(path)
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)  # checks every character, so it can raise too
        root = loader.get_single_node()
        if root is None:
            raise CaseFileError(path, 1, "the file is empty")
        _check_expansion(path, root)
        lines: dict[Location, int] = {}
        data = _plain(loader, root, (), lines, path)
    except yaml.YAMLError as error:
        line, message = _yaml_problem(error, text)
        raise CaseFileError(path, line, f"invalid YAML: {message}") from None
    finally:
        if loader is not None:
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
        if problem["type"] == "missing":  # name the key that is not there (at its parent's line)
            location = (*location, problem["loc"][-1])
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
    payload = _with_description(document, payload, axis_lines or {})
    try:
        return CaseFile.model_validate(payload, context=variant_context(variants))
    except ValidationError as error:
        raise describe_validation_error(error, document, payload, axis_lines) from None


def claim_name(claimed: dict[str, tuple[Path, str]], name: str, path: Path, line: int) -> None:
    """Records that ``path`` names a case ``name``. Names are the ids of reports and tables, so
    a second file with the same name is an error at its name's line."""
    first = claimed.setdefault(name, (path.resolve(), f"{path}:{line}"))
    if first[0] != path.resolve():
        raise CaseFileError(path, line, f"case name '{name}' is already used by {first[1]}")


def load_case_file(path: Path) -> tuple[LoadedDocument, CaseFile]:
    document = read_document(path)
    return document, validate(document)


_descriptions: dict[tuple[Path, float], ModelDescription] = {}


def read_description(path: Path) -> ModelDescription:
    """A model description file, validated; raises :class:`CaseFileError` at its line."""
    key = (path.resolve(), path.stat().st_mtime)
    if key not in _descriptions:
        document = read_document(path)
        try:
            _descriptions[key] = ModelDescription.model_validate(document.data)
        except ValidationError as error:
            raise describe_validation_error(error, document, document.data) from None
    return _descriptions[key]


def _with_description(
    document: LoadedDocument, payload: Any, axis_lines: dict[Location, int]
) -> Any:
    """The case's data with ``described`` filled in from the description ``model`` names."""
    if not isinstance(payload, dict):
        return payload
    if "described" in payload:
        line = axis_lines.get(("described",), document.line_of(("described",)))
        raise CaseFileError(document.path, line, "'described' is read from the model file")
    model = payload.get("model")
    path = description_path(model, document.path.parent) if isinstance(model, str) else None
    return payload if path is None else {**payload, "described": read_description(path)}
