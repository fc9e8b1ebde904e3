"""Reads a file's bytes, YAML and JSON safely, bounded by matrix/case/limits.py: its size (a
regular file only: never a FIFO or a device), its encoding, how large its aliases make it (an
alias bomb is a few lines that expand to billions of values), how deep it nests, and its tags
(plain data only). Returns the plain data and the line of every key and item; every problem is
a :class:`CaseFileError`, one line ``file:line: message``. Every file the matrix reads as input
(a case, a model file, a config.json, a JSON report or shard) is read here or, for JSON, by
:mod:`matrix.case.json_input` through :func:`read_text`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from matrix.case.limits import MAX_DEPTH, MAX_FILE_BYTES, MAX_VALUES

Location = tuple[str | int, ...]

# Tags a plain-data document resolves to; any other (!!python/..., !!set, !custom) is refused.
PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}"
    for name in ("null", "bool", "int", "float", "str", "timestamp", "map", "seq", "merge")
)


@dataclass(frozen=True)
class LoadedDocument:
    """A file's plain data (a case file's, a model's config.json) and the line of every key and
    item in it."""

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

    def error(
        self, location: Location, message: str, kind: type[CaseFileError] | None = None
    ) -> CaseFileError:
        """A problem at ``location``, worded ``key: message`` with the key's dotted path
        (``text_config.model_type``), as ``kind`` (a :class:`CaseFileError` by default)."""
        return (kind or CaseFileError)(
            self.path, self.line_of(location), f"{dotted(location)}: {message}"
        )


def dotted(location: Location) -> str:
    """A key's path as a user writes it: ``text_config.model_type``, ``requests.0.id``."""
    return ".".join(str(part) for part in location)


def one_line(text: str) -> str:
    """``text`` with control characters escaped: a message must stay on its line whatever a
    file's keys or values contain."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class CaseFileError(Exception):
    """A problem in a case file, as one line: ``file:line: message``."""

    def __init__(self, path: Path, line: int, message: str) -> None:
        message = one_line(message)
        super().__init__(f"{one_line(str(path))}:{line}: {message}")
        self.path = path
        self.line = line
        self.message = message


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
            if isinstance(key, bool):  # YAML 1.1: unquoted yes/no/on/off/true/false
                written = key_node.value
                raise CaseFileError(
                    path,
                    _line(key_node),
                    f"key {written} reads as the boolean {str(key).lower()} in YAML: "
                    f'quote it ("{written}":) to mean the word',
                )
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


# What a file that is neither a regular file nor a folder is, by its stat mode's test.
_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def not_regular(mode: int) -> str:
    """Why a file of stat ``mode`` (not a regular file) cannot be read as input, in words:
    ``a FIFO, not a regular file``."""
    kind = next((name for test, name in _SPECIAL_KINDS if test(mode)), "a special file")
    return f"{kind}, not a regular file"


def special_file(path: Path) -> str | None:
    """Why ``path`` (links followed) cannot be input, when it is neither a regular file nor a
    folder (a FIFO, ``/dev/zero``): for a command that hands paths on to another reader
    (pytest's collection) which would pass such a file over as "not found"; None otherwise,
    a missing path included."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # missing, a dangling link, a NUL in the name: said later
        return None
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else not_regular(mode)


def read_text(path: Path, limit: int = MAX_FILE_BYTES, what: str = "a case") -> str:
    """The file as text, refusing what is not a regular UTF-8 file of at most ``limit`` bytes
    (``what`` the file is, for the message)."""
    try:
        # Non-blocking, so a FIFO named like a case file is refused rather than waited on.
        with open(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as file:
            mode = os.fstat(file.fileno()).st_mode
            if not stat.S_ISREG(mode):  # (a directory raised already, when opened)
                raise CaseFileError(path, 1, f"cannot read: {not_regular(mode)}")
            data = file.read(limit + 1)
    except OSError as error:
        raise CaseFileError(path, 1, f"cannot read: {error.strerror or error}") from None
    if len(data) > limit:
        raise CaseFileError(path, 1, f"larger than {limit:,} bytes, the limit for {what}")
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


def _load(path: Path, text: str, build: Callable[[_BoundedLoader, yaml.Node], Any]) -> Any:
    """What ``build`` makes of the YAML ``text``'s node graph, once its size, depth, aliases
    and tags are checked."""
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)  # checks every character, so it can raise too
        root = loader.get_single_node()
        if root is None:
            raise CaseFileError(path, 1, "the file is empty")
        _check_expansion(path, root)
        return build(loader, root)
    except yaml.YAMLError as error:
        line, message = _yaml_problem(error, text)
        raise CaseFileError(path, line, f"invalid YAML: {message}") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_yaml(path: Path) -> tuple[Any, dict[Location, int]]:
    """The file's plain data and the line of every key and item in it."""
    lines: dict[Location, int] = {}
    data = _load(path, read_text(path), lambda loader, root: _plain(loader, root, (), lines, path))
    return data, lines


def read_yaml_data(path: Path, limit: int = MAX_FILE_BYTES, what: str = "a case") -> Any:
    """A YAML file's data as PyYAML's safe loader reads it (YAML 1.1's booleans as keys too: a
    GitHub workflow's ``on:``), the file read and bounded as :func:`read_yaml` reads one."""
    text = read_text(path, limit, what)
    return _load(path, text, lambda loader, root: _construct(loader, root, path))
