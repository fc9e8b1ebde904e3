"""JSON input read as every input is (:func:`matrix.case.reading.read_text`: bounded, a
regular UTF-8 file), checked for depth before Python's parser (which recurses per level), every
problem a one-line :class:`~matrix.case.reading.CaseFileError` at its line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from matrix.case.limits import MAX_DEPTH, MAX_FILE_BYTES
from matrix.case.reading import CaseFileError, read_text

# A JSON string (a closed one: strings hold no raw newline, so taking them out keeps the lines),
# and a bracket.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def _too_deep(outside: str) -> int | None:
    """The line where JSON text (its strings taken out) first nests deeper than
    :data:`MAX_DEPTH`, or None."""
    depth = 0
    for bracket in _JSON_BRACKET.finditer(outside):
        if bracket.group() in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return outside.count("\n", 0, bracket.start()) + 1
        else:
            depth -= 1
    return None


def _open_at_end(outside: str) -> bool:
    """Whether JSON text (its closed strings taken out) ends inside a string, an object or an
    array: a file cut short."""
    opened = outside.count("[") + outside.count("{")
    return '"' in outside or opened > outside.count("]") + outside.count("}")


def parse_json(path: Path, text: str) -> Any:
    """``text`` (the file ``path``'s) as JSON data; raises :class:`CaseFileError` at the line
    where it is not JSON, or nests deeper than :data:`MAX_DEPTH` (checked before parsing:
    Python's parser recurses per level)."""
    outside = _JSON_STRING.sub("s", text)  # no quote, bracket or newline left in a string
    too_deep = _too_deep(outside)
    if too_deep is not None:
        raise CaseFileError(path, too_deep, f"nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        if not text.strip():
            problem = "the file is empty"
        elif _open_at_end(outside):
            problem = f"the JSON ends before it is complete: a truncated file? ({error.msg})"
        else:
            problem = f"not valid JSON: {error.msg} (column {error.colno})"
        raise CaseFileError(path, error.lineno, problem) from None
    except ValueError as error:  # a number of 5,000 digits
        raise CaseFileError(path, 1, f"unreadable value: {error}") from None


def read_json(path: Path, limit: int = MAX_FILE_BYTES, what: str = "a case") -> Any:
    """A JSON file's data, read as :func:`read_text` reads a file and as :func:`parse_json`
    parses it."""
    return parse_json(path, read_text(path, limit, what))
