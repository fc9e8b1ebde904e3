"""A GitHub Actions workflow read as GitHub reads it, for ``play`` to run here: its
jobs in the order ``needs`` gives, each job's matrix expanded (``include`` and ``exclude`` as
GitHub applies them), and the ``${{ }}`` expressions its steps use evaluated.

The expressions are a subset of GitHub's: contexts (``matrix.x``, ``env.X``, ``runner.os``),
literals, ``!``, ``&&``, ``||``, ``==``, ``!=``, parentheses, and the status functions
(``success()``, ``failure()``, ``always()``, ``cancelled()``). Anything else is a
:class:`WorkflowError` naming the expression, never a guess. Pure: reads text, runs nothing.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matrix.case.limits import MAX_MATRIX_JOBS, MAX_MATRIX_PRODUCT
from matrix.case.reading import CaseFileError, read_yaml_data

# What an expression gives: a string, number, bool, None or a mapping (a context).
Value = Any
STATUS_FUNCTIONS = ("success", "failure", "always", "cancelled")
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+(?:\.\d+)?)|(?P<string>'(?:[^']|'')*')"
    r"|(?P<op>==|!=|&&|\|\||[!(),])|(?P<name>[A-Za-z_][\w-]*(?:\.[A-Za-z_*][\w-]*)*))"
)


class WorkflowError(Exception):
    """A workflow this module cannot read or play; the message is one line."""


@dataclass(frozen=True)
class JobRun:
    """One run of a job: a combination of its matrix (empty without one), and its name."""

    job_id: str
    name: str
    matrix: dict[str, Any]
    definition: dict[str, Any]


def load_workflow(path: Path) -> dict[str, Any]:
    """The workflow file as data (YAML 1.1's ``on: true`` read back as ``on``), read as every
    input is (a regular file, bounded: never a FIFO waited on or ``/dev/zero`` read whole)."""
    try:
        data = read_yaml_data(path, what="a workflow")
    except CaseFileError as error:
        raise WorkflowError(str(error)) from None
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), dict):
        raise WorkflowError(f"{path}: not a workflow (no jobs)")
    if True in data:
        data["on"] = data.pop(True)
    return data


def expand_matrix(matrix: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The combinations of a ``strategy.matrix``, in GitHub's order: the product of its lists,
    less those an ``exclude`` entry matches; then each ``include`` entry added to every one of
    those it would not overwrite an original value of, or else as a combination of its own."""
    if not isinstance(matrix, Mapping):
        raise WorkflowError(f"matrix: {str(matrix)[:60]!r} is not a mapping (cannot play it)")
    keys = [key for key in matrix if key not in ("include", "exclude")]
    for key in keys:
        if not isinstance(matrix[key], list):
            raise WorkflowError(f"matrix.{key}: {matrix[key]!r:.60} is not a list (cannot play it)")
    size = math.prod(len(matrix[key]) for key in keys) if keys else 0
    if size > MAX_MATRIX_PRODUCT:
        raise WorkflowError(
            f"matrix: its {len(keys)} lists make {size:,} combinations, over the "
            f"{MAX_MATRIX_PRODUCT:,} this player expands (GitHub runs at most "
            f"{MAX_MATRIX_JOBS} jobs of a matrix)"
        )
    excluded, included = _entries(matrix, "exclude"), _entries(matrix, "include")
    combos = [dict(zip(keys, values, strict=True)) for values in _product(matrix, keys)]
    combos = [c for c in combos if not any(_matches(c, entry) for entry in excluded)]
    originals = [dict(c) for c in combos]  # an include extends these, never a new one
    added: list[dict[str, Any]] = []
    for entry in included:
        fitting = [
            combo
            for combo, original in zip(combos, originals, strict=True)
            if all(original.get(k, v) == v for k, v in entry.items())
        ]
        for combo in fitting:
            combo.update(entry)
        if not fitting:
            added.append(dict(entry))
    combos += added
    if len(combos) > MAX_MATRIX_JOBS:
        raise WorkflowError(
            f"matrix: {len(combos):,} jobs, over the {MAX_MATRIX_JOBS} GitHub runs of a matrix"
        )
    return combos


def _entries(matrix: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    """A matrix's ``include`` or ``exclude``: a list of mappings, at most as many as a
    matrix's jobs."""
    entries = matrix.get(key) or []
    if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
        raise WorkflowError(f"matrix.{key}: {entries!r:.60} is not a list of mappings")
    if len(entries) > MAX_MATRIX_JOBS:
        raise WorkflowError(
            f"matrix.{key}: {len(entries):,} entries, over the {MAX_MATRIX_JOBS} GitHub runs of "
            "a matrix"
        )
    return entries


def _product(matrix: Mapping[str, Any], keys: Sequence[str]) -> list[tuple[Any, ...]]:
    return list(itertools.product(*(matrix[key] for key in keys))) if keys else []


def _matches(combo: Mapping[str, Any], entry: Mapping[str, Any]) -> bool:
    return all(combo.get(key) == value for key, value in entry.items())


def job_order(workflow: Mapping[str, Any]) -> list[str]:
    """The jobs' ids, each after the jobs it ``needs`` (file order among the ready ones)."""
    jobs: dict[str, Any] = workflow["jobs"]
    needs = {job: needs_of(jobs[job]) for job in jobs}
    for job, wanted in needs.items():
        unknown = [n for n in wanted if n not in jobs]
        if unknown:
            raise WorkflowError(f"job {job} needs {unknown[0]}, which is not a job here")
    ordered: list[str] = []
    while len(ordered) < len(jobs):
        ready = [j for j in jobs if j not in ordered and all(n in ordered for n in needs[j])]
        if not ready:
            raise WorkflowError("the jobs' needs make a cycle")
        ordered.append(ready[0])
    return ordered


def needs_of(job: Mapping[str, Any]) -> list[str]:
    """The jobs a job needs (``needs:``, one name or a list)."""
    needs = job.get("needs") or []
    return [needs] if isinstance(needs, str) else list(needs)


def job_runs(workflow: Mapping[str, Any], job_id: str) -> list[JobRun]:
    """A job's runs: one per combination of its matrix, named as GitHub names them."""
    job: dict[str, Any] = workflow["jobs"][job_id]
    matrix = (job.get("strategy") or {}).get("matrix")
    combos = expand_matrix(matrix) if matrix else [{}]
    runs = []
    for combo in combos:
        if "name" in job:
            name = interpolate(str(job["name"]), {"matrix": combo})
        elif combo:
            name = f"{job_id} ({', '.join(_text(v) for v in combo.values())})"
        else:
            name = job_id
        runs.append(JobRun(job_id, name, combo, job))
    return runs


@dataclass(frozen=True)
class Status:
    """What the status functions see: whether an earlier step (or needed job) failed."""

    failed: bool = False


def interpolate(text: str, contexts: Mapping[str, Any], status: Status | None = None) -> str:
    """``text`` with each ``${{ expression }}`` replaced by its value as a string."""
    return EXPRESSION.sub(lambda m: _text(evaluate(m.group(1), contexts, status)), text)


def condition(text: Any, contexts: Mapping[str, Any], status: Status) -> bool:
    """Whether an ``if:`` holds. As on GitHub, one that calls no status function is
    ``success() && (it)``, and an absent one is ``success()``."""
    expression = "success()" if text is None else str(text).strip()
    match = re.fullmatch(r"\$\{\{(.*)\}\}", expression, re.DOTALL)
    expression = match.group(1) if match else expression
    if not any(f"{name}(" in expression for name in STATUS_FUNCTIONS):
        expression = f"success() && ({expression})"
    return _truthy(evaluate(expression, contexts, status))


def evaluate(expression: str, contexts: Mapping[str, Any], status: Status | None = None) -> Value:
    """The value of one expression (without its ``${{ }}``)."""
    tokens = _tokens(expression)
    parser = _Parser(tokens, contexts, status or Status(), expression)
    value = parser.either()
    if parser.position != len(tokens):
        raise WorkflowError(f"cannot play the expression {expression.strip()!r}")
    return value


def _tokens(expression: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    while expression[position:].strip():
        match = TOKEN.match(expression, position)
        if not match:
            raise WorkflowError(f"cannot play the expression {expression.strip()!r}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


class _Parser:
    """Recursive descent over the tokens: either (||) > both (&&) > equality > not > atom."""

    def __init__(
        self, tokens: list[tuple[str, str]], contexts: Mapping[str, Any], status: Status, text: str
    ) -> None:
        self.tokens, self.contexts, self.status, self.text = tokens, contexts, status, text
        self.position = 0

    def _peek(self) -> str | None:
        return self.tokens[self.position][1] if self.position < len(self.tokens) else None

    def _take(self, expected: str | None = None) -> tuple[str, str]:
        if self.position == len(self.tokens) or (expected and self._peek() != expected):
            raise WorkflowError(f"cannot play the expression {self.text.strip()!r}")
        self.position += 1
        return self.tokens[self.position - 1]

    def either(self) -> Value:
        value = self.both()
        while self._peek() == "||":
            self._take()
            other = self.both()
            value = value if _truthy(value) else other
        return value

    def both(self) -> Value:
        value = self.equality()
        while self._peek() == "&&":
            self._take()
            other = self.equality()
            value = other if _truthy(value) else value
        return value

    def equality(self) -> Value:
        value = self.negation()
        while self._peek() in ("==", "!="):
            _, op = self._take()
            same = _loosely_equal(value, self.negation())
            value = same if op == "==" else not same
        return value

    def negation(self) -> Value:
        if self._peek() == "!":
            self._take()
            return not _truthy(self.negation())
        return self.atom()

    def atom(self) -> Value:
        kind, text = self._take()
        if text == "(" and kind == "op":
            value = self.either()
            self._take(")")
            return value
        if kind == "number":
            return float(text)
        if kind == "string":
            return text[1:-1].replace("''", "'")
        if kind != "name":
            raise WorkflowError(f"cannot play the expression {self.text.strip()!r}")
        if text in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[text]
        if self._peek() == "(":
            if text not in STATUS_FUNCTIONS:
                raise WorkflowError(f"cannot play the function {text}() in {self.text.strip()!r}")
            self._take("(")
            self._take(")")
            return self._status(text)
        return self._lookup(text)

    def _status(self, name: str) -> bool:
        return {
            "success": not self.status.failed,
            "failure": self.status.failed,
            "always": True,
            "cancelled": False,  # a played run is never cancelled
        }[name]

    def _lookup(self, path: str) -> Value:
        head, *rest = path.split(".")
        if head not in self.contexts:
            raise WorkflowError(f"cannot play the context {head!r} in {self.text.strip()!r}")
        value: Any = self.contexts[head]
        for part in rest:
            value = value.get(part) if isinstance(value, Mapping) else None
        return value


def _truthy(value: Value) -> bool:
    return value not in (False, 0, "", None)


def _loosely_equal(left: Value, right: Value) -> bool:
    if isinstance(left, str) and isinstance(right, str):
        return left.casefold() == right.casefold()
    return _number(left) == _number(right)


def _number(value: Value) -> float | None:
    try:
        return float(value) if not isinstance(value, dict) and value is not None else None
    except ValueError:
        return None


def _text(value: Any) -> str:
    """A value as GitHub writes it into a string: ``true``, ``3``, ``''`` for null."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
