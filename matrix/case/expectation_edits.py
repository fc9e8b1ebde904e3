"""Minimal text edits to a case file's expectations, for ``python -m matrix
record-expectations``: values set in the top-level ``expect:`` (in the style it is written,
flow or block), and ``when:`` entries added after the last one. Every other line, comment and
key order stays as it is, so the change reads as a short diff. Pure: text and the file's
loaded lines in, text out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from matrix.case.reading import LoadedDocument
from matrix.case.when import label_of

# Words YAML 1.1 reads as something else than the word (a boolean, null): quoted.
_NOT_PLAIN = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


class EditError(ValueError):
    """A file whose expectations cannot be edited in place; the message is one line."""


@dataclass(frozen=True)
class Edit:
    """At 1-based ``line``: the line replaced (``replace``, when given), then ``after``
    inserted below it (``line`` 0: at the top; past the end: at the end)."""

    line: int
    replace: str | None = None
    after: tuple[str, ...] = ()


def scalar(word: str) -> str:
    """``word`` as YAML that reads back as that string: plain where it can be, else quoted."""
    if _PLAIN.fullmatch(word) and word.lower() not in _NOT_PLAIN:
        return word
    return json.dumps(word)


def flow(mapping: Mapping[str, str | Sequence[str]]) -> str:
    """``{key: value, key: [a, b]}``."""
    parts = []
    for key, value in mapping.items():
        text = scalar(value) if isinstance(value, str) else f"[{', '.join(map(scalar, value))}]"
        parts.append(f"{scalar(key)}: {text}")
    return "{" + ", ".join(parts) + "}"


def when_entry(conditions: Mapping[str, Sequence[str]], expect: Mapping[str, str]) -> str:
    """A ``when:`` entry: each axis with its label (or labels), then the expectations."""
    named: dict[str, str | Sequence[str]] = {
        axis: labels[0] if len(labels) == 1 else labels for axis, labels in conditions.items()
    }
    return flow(named)[:-1] + f", expect: {flow(expect)}}}"


def _block_end(document: LoadedDocument, key: str, lines: Sequence[str]) -> int:
    """The last line holding the top-level ``key``'s value (blank and comment lines before
    the next key left to it)."""
    start = document.lines[(key,)]
    after = [n for n in _top_lines(document) if n > start]
    end = min(after) - 1 if after else len(lines)
    while end > start and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    return end


def _top_lines(document: LoadedDocument) -> list[int]:
    """The line of each top-level key."""
    return [document.lines[(k,)] for k in document.data if (k,) in document.lines]


def _comment(rest: str) -> str:
    """What follows a value on its line: a comment, kept (or nothing)."""
    rest = rest.rstrip("\n")
    return rest if rest.strip().startswith("#") or not rest.strip() else ""


def expect_edits(
    document: LoadedDocument, lines: Sequence[str], values: Mapping[str, str]
) -> list[Edit]:
    """The top-level ``expect:`` with ``values`` set (added where absent)."""
    current = document.data.get("expect")
    if not isinstance(current, dict):
        written = flow({**(current or {}), **values}) if current is None else None
        if "expect" in document.data and written is not None:  # `expect:` with nothing after
            line = document.lines[("expect",)]
            head = re.match(r"^(\s*expect\s*:)(.*)$", lines[line - 1].rstrip("\n"))
            if head is None:
                raise EditError(f"line {line}: expect: not in a form this tool edits")
            return [Edit(line, f"{head.group(1)} {written}{_comment(head.group(2))}\n")]
        # Before the axes and their `when:` (and the comments above them), as the shipped
        # cases order their keys; else at the end.
        later = [document.lines[(k,)] for k in ("matrix", "when") if (k,) in document.lines]
        at = min(later) - 1 if later else len(lines)
        while later and at > 0 and lines[at - 1].lstrip().startswith("#"):
            at -= 1
        return [Edit(at, None, (f"expect: {flow(dict(values))}\n",))]
    line = document.lines[("expect",)]
    raw = lines[line - 1].rstrip("\n")
    inline = re.match(r"^(\s*expect\s*:\s*)(\{[^{}#]*\})(.*)$", raw)
    if inline is not None:
        mapping = {str(k): str(v) for k, v in current.items()}
        return [Edit(line, f"{inline.group(1)}{flow({**mapping, **values})}{inline.group(3)}\n")]
    if re.match(r"^\s*expect\s*:\s*\{", raw):
        raise EditError(f"line {line}: expect: a flow mapping over several lines")
    edits, added = [], []
    for variant, value in values.items():
        if variant in current:
            at = document.lines[("expect", variant)]
            entry = re.match(r"^(\s*[^:#]+:\s*)(\S+)(.*)$", lines[at - 1].rstrip("\n"))
            if entry is None:
                raise EditError(f"line {at}: expect.{variant}: not in a form this tool edits")
            edits.append(Edit(at, f"{entry.group(1)}{scalar(value)}{entry.group(3)}\n"))
        else:
            added.append((variant, value))
    if added:
        entries = [document.lines[("expect", k)] for k in current]
        if not entries:
            raise EditError(f"line {line}: expect: an empty block mapping")
        indent = re.match(r"^\s*", lines[entries[0] - 1]).group(0)  # type: ignore[union-attr]
        news = tuple(f"{indent}{scalar(v)}: {scalar(value)}\n" for v, value in added)
        edits.append(Edit(max(entries), None, news))
    return edits


Conditions = Mapping[str, Sequence[str]]  # a when: entry's axes, each with its labels


def _same_entry(document: LoadedDocument, lines: Sequence[str], conditions: Conditions) -> int:
    """The index of a one-line ``when:`` entry naming exactly ``conditions`` (-1: none)."""
    for index, entry in enumerate(document.data["when"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("expect"), dict):
            continue
        named = {
            str(axis): {label_of(v) for v in (value if isinstance(value, list) else [value])}
            for axis, value in entry.items()
            if axis != "expect"
        }
        line = lines[document.lines[("when", index)] - 1]
        one_line = re.match(r"^\s*-\s*\{.*\}\s*(#.*)?$", line.rstrip("\n")) is not None
        if one_line and named == {axis: set(labels) for axis, labels in conditions.items()}:
            return index
    return -1


def when_edits(
    document: LoadedDocument,
    lines: Sequence[str],
    entries: Sequence[tuple[Conditions, Mapping[str, str]]],
) -> list[Edit]:
    """Each entry's expectations written: into a one-line ``when:`` entry naming the same
    points (rewritten whole), else in a new entry after the last one (a ``when:`` made at the
    end of the file where it has none)."""
    current = document.data.get("when")
    rendered = [when_entry(conditions, expect) for conditions, expect in entries]
    if not current:
        body = tuple(f"  - {entry}\n" for entry in rendered)
        if "when" in document.data:  # `when:` or `when: []`
            return [Edit(document.lines[("when",)], "when:\n", body)]
        return [Edit(len(lines), None, ("when:\n", *body))]
    line = document.lines[("when",)]
    if re.match(r"^\s*when\s*:\s*\[", lines[line - 1]):
        raise EditError(f"line {line}: when: a flow list")
    dash = re.match(r"^(\s*)-", lines[document.lines[("when", 0)] - 1])
    if dash is None:
        raise EditError(f"line {line}: when: not in a form this tool edits")
    edits, added = [], []
    for (conditions, expect), text in zip(entries, rendered, strict=True):
        index = _same_entry(document, lines, conditions)
        if index < 0:
            added.append(f"{dash.group(1)}- {text}\n")
            continue
        at = document.lines[("when", index)]
        old = document.data["when"][index]
        merged = {**{str(k): str(v) for k, v in old["expect"].items()}, **expect}
        comment = re.search(r"\}\s*(#.*)$", lines[at - 1].rstrip("\n"))
        tail = f"  {comment.group(1)}" if comment else ""
        edits.append(Edit(at, f"{dash.group(1)}- {when_entry(conditions, merged)}{tail}\n"))
    if added:
        edits.append(Edit(_block_end(document, "when", lines), None, tuple(added)))
    return edits


def apply(text: str, edits: Sequence[Edit]) -> str:
    """``text`` with ``edits`` made, the lowest line last so that each edit's line holds."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    for edit in sorted(edits, key=lambda e: e.line, reverse=True):
        if edit.replace is not None:
            lines[edit.line - 1] = edit.replace
        lines[edit.line : edit.line] = list(edit.after)
    return "".join(lines)
