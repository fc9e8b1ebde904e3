"""Which statements of a function may be mutated: all of them, or a :class:`Region`'s, found by
its landmarks in the function's syntax tree. Pure: ``ast`` only.

A node is addressed by its path from the function's definition, a tuple of ``(field, index)``
steps (``index`` -1 for a field that holds one node): ``(("body", 3), ("test", -1))``. A path
names one node, whatever shares its line and column (a left-nested ``a + b + c`` and its inner
``a + b`` start at the same place).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from matrix.mutate.surface import Region

Path = tuple[tuple[str, int], ...]
# Statements never mutated: an assertion is vLLM checking itself (a mutant there fails loudly
# and says nothing of a suite), and logging changes no state.
QUIET_CALLS = ("logger",)


def children(node: ast.AST) -> Iterator[tuple[tuple[str, int], ast.AST]]:
    """Each child node with its step, in field order."""
    for name, value in ast.iter_fields(node):
        if isinstance(value, ast.AST):
            yield (name, -1), value
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, ast.AST):
                    yield (name, index), item


def walk(node: ast.AST, path: Path = ()) -> Iterator[tuple[Path, ast.AST, ast.stmt | None]]:
    """Every node under ``node`` with its path and the innermost statement holding it (a
    statement: the statement holding it, None at the top)."""
    stack: list[tuple[Path, ast.AST, ast.stmt | None]] = [(path, node, None)]
    while stack:
        at, current, holder = stack.pop()
        yield at, current, holder
        inner = current if isinstance(current, ast.stmt) else holder
        stack.extend(
            ((*at, step), child, inner) for step, child in reversed(list(children(current)))
        )


def node_at(root: ast.AST, path: Path) -> ast.AST:
    """The node ``path`` names under ``root``."""
    node = root
    for name, index in path:
        value = getattr(node, name)
        node = value if index < 0 else value[index]
    return node


def names_in(node: ast.AST, *, headers_only: bool) -> set[str]:
    """The names and attribute names ``node`` uses; with ``headers_only``, not those of the
    statements nested in its blocks."""
    found: set[str] = set()
    for _, child, holder in walk(node):
        if headers_only and holder is not None and holder is not node:
            continue
        if isinstance(child, ast.Name):
            found.add(child.id)
        elif isinstance(child, ast.Attribute):
            found.add(child.attr)
    return found


def blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists nested in ``stmt`` (bodies, else blocks, handlers' bodies)."""
    nested: list[list[ast.stmt]] = []
    for name in ("body", "orelse", "finalbody"):
        value = getattr(stmt, name, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            nested.append(value)
    for handler in getattr(stmt, "handlers", ()):
        nested.append(handler.body)
    return nested


def quiet(stmt: ast.stmt) -> bool:
    """An assertion or a logging call: never mutated."""
    if isinstance(stmt, ast.Assert):
        return True
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    func = call.func if isinstance(call, ast.Call) else None
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id in QUIET_CALLS
    )


def _assigned(stmt: ast.stmt) -> set[str]:
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _collect(statements: list[ast.stmt], region: Region | None, into: set[int]) -> None:
    if region is not None and any(_assigned(s) & set(region.other_blocks) for s in statements):
        return
    for stmt in statements:
        if quiet(stmt):
            continue
        if region is not None and names_in(stmt, headers_only=True) & set(region.other_features):
            continue
        inner: set[int] = set()
        for nested in blocks(stmt):
            _collect(nested, region, inner)
        if blocks(stmt) and not inner:
            continue  # a test whose every branch is another feature's decides nothing here
        into.add(id(stmt))
        into.update(inner)


class RegionNotFound(Exception):
    """A region's landmark is not in the function (the release changed it)."""


def mutable_statements(function: ast.FunctionDef, region: Region | None) -> set[int]:
    """The ``id`` of every statement of ``function`` that may be mutated."""
    allowed: set[int] = set()
    if region is None or not region.anchor:
        _collect(function.body, region, allowed)
        return allowed
    enclosing = _enclosing(function, region)
    if region.take == "branch":
        allowed.add(id(enclosing))
    _collect(enclosing.body, region, allowed)  # type: ignore[attr-defined]
    return allowed


def _enclosing(function: ast.FunctionDef, region: Region) -> ast.stmt:
    """The innermost statement of the region's kind around the anchor's first use."""
    parents: dict[int, ast.AST] = {}
    for parent in ast.walk(function):
        for _, child in children(parent):
            parents[id(child)] = parent
    anchors = [
        node
        for _, node, _ in walk(function)
        if (isinstance(node, ast.Name) and node.id == region.anchor)
        or (isinstance(node, ast.Attribute) and node.attr == region.anchor)
    ]
    if not anchors:
        raise RegionNotFound(f"{function.name}: no `{region.anchor}` in it")
    around: ast.AST | None = anchors[0]
    while around is not None and not (
        type(around).__name__ == region.enclosing and around is not function
    ):
        around = parents.get(id(around))
    if not isinstance(around, ast.stmt):
        raise RegionNotFound(f"{function.name}: no {region.enclosing} around `{region.anchor}`")
    return around


def surface_lines(function: ast.FunctionDef, allowed: set[int]) -> set[int]:
    """The lines of the mutable statements' own code (a compound statement's header, not its
    nested blocks): where the region's branches start."""
    lines: set[int] = set()
    for _, node, holder in walk(function):
        if holder is not None and id(holder) in allowed and not isinstance(node, ast.stmt):
            start = getattr(node, "lineno", None)
            if start is not None:
                lines.update(range(start, (getattr(node, "end_lineno", None) or start) + 1))
        if isinstance(node, ast.stmt) and id(node) in allowed:
            lines.add(node.lineno)
    return lines
