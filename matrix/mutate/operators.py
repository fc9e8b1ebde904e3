"""The mutation operators: what one node may become. Pure: ``ast`` only.

Each operator looks at one node (with the field it sits in) and gives ``(name, replacement)``
pairs; the names make the mutants' ids (``lt-to-le``, ``drop-right``, ``plus1``). They are the
classic ones for arithmetic and decisions: a comparison's boundary or sense flipped, a
condition negated, ``and``/``or`` swapped, a term of a sum dropped, one more or one less on a
count (an integer, a ``cdiv``, an int function's result, an augmented assignment), ``min``
and ``max`` swapped, a boolean constant flipped, a state change (a call statement or an
assignment to an attribute) removed, and a function returning at once.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator

Replacement = tuple[str, ast.AST]

COMPARISONS: dict[type[ast.cmpop], tuple[type[ast.cmpop], ...]] = {
    ast.Lt: (ast.LtE, ast.GtE),
    ast.LtE: (ast.Lt, ast.Gt),
    ast.Gt: (ast.GtE, ast.LtE),
    ast.GtE: (ast.Gt, ast.Lt),
    ast.Eq: (ast.NotEq,),
    ast.NotEq: (ast.Eq,),
    ast.Is: (ast.IsNot,),
    ast.IsNot: (ast.Is,),
    ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,),
}
OPERATOR_WORDS = {
    ast.Lt: "lt",
    ast.LtE: "le",
    ast.Gt: "gt",
    ast.GtE: "ge",
    ast.Eq: "eq",
    ast.NotEq: "ne",
    ast.Is: "is",
    ast.IsNot: "isnot",
    ast.In: "in",
    ast.NotIn: "notin",
}
COUNT_CALLS = ("cdiv",)


def _plus(node: ast.expr, amount: int) -> ast.expr:
    op: ast.operator = ast.Add() if amount > 0 else ast.Sub()
    return ast.BinOp(left=copy.deepcopy(node), op=op, right=ast.Constant(abs(amount)))


def _called(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def _comparisons(node: ast.Compare) -> Iterator[Replacement]:
    for index, op in enumerate(node.ops):
        for other in COMPARISONS.get(type(op), ()):
            changed = copy.deepcopy(node)
            changed.ops[index] = other()
            words = f"{OPERATOR_WORDS[type(op)]}-to-{OPERATOR_WORDS[other]}"
            yield (words if len(node.ops) == 1 else f"{words}-{index + 1}"), changed


def expression(node: ast.AST, step: tuple[str, int]) -> Iterator[Replacement]:
    """What an expression node may become; ``step`` is its place in its parent."""
    if step[0] == "test" and isinstance(node, ast.expr):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield "negate", copy.deepcopy(node.operand)
        elif not isinstance(node, ast.Constant):
            yield "negate", ast.UnaryOp(op=ast.Not(), operand=copy.deepcopy(node))
    if isinstance(node, ast.Compare):
        yield from _comparisons(node)
    elif isinstance(node, ast.BoolOp):
        swapped = copy.deepcopy(node)
        swapped.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield ("and-to-or" if isinstance(node.op, ast.And) else "or-to-and"), swapped
    elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        yield "drop-right", copy.deepcopy(node.left)
        if isinstance(node.op, ast.Add):
            yield "drop-left", copy.deepcopy(node.right)
    elif isinstance(node, ast.Call) and _called(node) in ("min", "max"):
        swapped_call = copy.deepcopy(node)
        name = "max" if _called(node) == "min" else "min"
        swapped_call.func = ast.Name(id=name, ctx=ast.Load())
        yield f"{_called(node)}-to-{name}", swapped_call
    elif isinstance(node, ast.Call) and _called(node) in COUNT_CALLS:
        yield "plus1", _plus(node, 1)
        yield "minus1", _plus(node, -1)
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
        yield "flip", ast.Constant(not node.value)
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        yield "plus1", ast.Constant(node.value + 1)
        if node.value > 0:
            yield "minus1", ast.Constant(node.value - 1)


def statement(stmt: ast.stmt, returns_int: bool) -> Iterator[Replacement]:
    """What a statement may become: removed, one more on its count, a result off by one."""
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, (ast.Add, ast.Sub)):
        more = copy.deepcopy(stmt)
        more.value = _plus(stmt.value, 1)
        yield "aug-plus1", more
        yield "delete", ast.Pass()
    elif _changes_state(stmt):
        yield "delete", ast.Pass()
    elif isinstance(stmt, ast.Return) and returns_int and stmt.value is not None:
        for amount, name in ((1, "return-plus1"), (-1, "return-minus1")):
            yield name, ast.Return(value=_plus(stmt.value, amount))


def _changes_state(stmt: ast.stmt) -> bool:
    """A call statement, or an assignment to an attribute or an item."""
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Call)
    return isinstance(stmt, ast.Assign) and all(
        isinstance(t, (ast.Attribute, ast.Subscript)) for t in stmt.targets
    )


def annotation_words(function: ast.FunctionDef) -> str:
    """The function's return annotation as written (``int``, ``bool``, ``None``, ``""``)."""
    return ast.unparse(function.returns) if function.returns is not None else ""


def early_returns(function: ast.FunctionDef) -> Iterator[Replacement]:
    """The function returning before its first statement: what it returns by its annotation
    (0 for a count, either truth value for a decision, None otherwise)."""
    kind = annotation_words(function)
    values: list[tuple[str, int | bool | None]] = [("return-early", None)]
    if kind == "int":
        values = [("return-0", 0)]
    elif kind == "bool":
        values = [("return-true", True), ("return-false", False)]
    for name, value in values:
        yield name, ast.Return(value=ast.Constant(value))


def first_statement(function: ast.FunctionDef) -> int:
    """The index of the first statement after the docstring."""
    body = function.body
    docstring = (
        isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )
    return 1 if docstring and len(body) > 1 else 0
