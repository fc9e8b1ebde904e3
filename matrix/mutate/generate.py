"""The mutants of a release's surface, read from the installed vLLM's source files without
importing it. Pure but for reading those files.

Each mutant changes one node, addressed by its path in the function (``regions``); two
mutants never make the same function (a change that makes the same code as an earlier one, or
none at all, is dropped). Its id is ``Class.method:LINE:OPERATOR`` (``#2``, ``#3`` after it
when a line has several of one operator), the same on every machine for one release's files.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from matrix.mutate import operators
from matrix.mutate.regions import Path as NodePath
from matrix.mutate.regions import RegionNotFound, mutable_statements, node_at, walk
from matrix.mutate.surface import Target

DIFF_WIDTH = 90  # characters of each side of a mutant's one-line diff


@dataclass(frozen=True)
class Mutant:
    """One change to one function: where, what, and the diff in one line."""

    id: str
    target: str  # module:qualname
    file: str  # relative to vLLM's package's parent: vllm/v1/core/...
    line: int
    end_line: int
    operator: str
    path: NodePath
    diff: str

    @property
    def function(self) -> str:
        """``Class.method``."""
        return self.target.partition(":")[2]

    def to_dict(self) -> dict[str, object]:
        """As JSON holds it."""
        return {
            "id": self.id,
            "target": self.target,
            "file": self.file,
            "line": self.line,
            "end_line": self.end_line,
            "operator": self.operator,
            "path": [list(step) for step in self.path],
            "diff": self.diff,
        }


class SurfaceError(Exception):
    """A target that is not in the installed release's files: a one-line reason."""


def vllm_root() -> Path:
    """The folder holding the installed ``vllm`` package (found, not imported)."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise SurfaceError("vLLM is not installed in this environment")
    return Path(next(iter(spec.submodule_search_locations))).parent


def module_file(module: str) -> str:
    """``vllm.v1.core.kv_cache_manager`` -> ``vllm/v1/core/kv_cache_manager.py``."""
    return module.replace(".", "/") + ".py"


def file_digest(path: Path) -> str:
    """The source file's digest: a mutant's path means something only in the file it was
    made from."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def find_function(tree: ast.Module, qualname: str) -> ast.FunctionDef:
    """The definition of ``Class.method`` (or a module-level function) in ``tree``."""
    scope: list[ast.stmt] = tree.body
    *classes, name = qualname.split(".")
    for class_name in classes:
        found = [s for s in scope if isinstance(s, ast.ClassDef) and s.name == class_name]
        if not found:
            raise SurfaceError(f"{qualname}: no class {class_name}")
        scope = found[0].body
    functions = [s for s in scope if isinstance(s, ast.FunctionDef) and s.name == name]
    if not functions:
        raise SurfaceError(f"{qualname}: no such function")
    return functions[-1]  # as the class body leaves it: the last definition wins


def _one_line(node: ast.AST) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= DIFF_WIDTH else text[: DIFF_WIDTH - 3] + "..."


def _changes(
    function: ast.FunctionDef, allowed: set[int], whole: bool
) -> list[tuple[NodePath, ast.AST, str, ast.AST]]:
    """Every (path, node, operator, replacement) the operators give for ``function``."""
    returns_int = operators.annotation_words(function) == "int"
    found: list[tuple[NodePath, ast.AST, str, ast.AST]] = []
    if whole:
        first = operators.first_statement(function)
        first_node = function.body[first]
        for name, replacement in operators.early_returns(function):
            found.append(((("body", first),), first_node, name, replacement))
    for path, node, holder in walk(function):
        if not path:
            continue
        if isinstance(node, ast.stmt):
            if id(node) in allowed:
                found += [(path, node, n, r) for n, r in operators.statement(node, returns_int)]
        elif holder is not None and id(holder) in allowed:
            found += [(path, node, n, r) for n, r in operators.expression(node, path[-1])]
    return found


def replaced(
    function: ast.FunctionDef, path: NodePath, replacement: ast.AST, in_place: bool = False
) -> ast.FunctionDef:
    """``function`` with the node at ``path`` replaced (placed where it was): a copy, or, with
    ``in_place`` (a forked child's own tree), the function itself."""
    changed = function if in_place else copy.deepcopy(function)
    *parent_path, (name, index) = path
    parent = node_at(changed, tuple(parent_path))
    new = copy.deepcopy(replacement)
    old = getattr(parent, name) if index < 0 else getattr(parent, name)[index]
    ast.copy_location(new, old)
    for child in ast.walk(new):  # the new parts take the old node's place
        if "lineno" in child._attributes and not hasattr(child, "lineno"):
            ast.copy_location(child, old)
    if index < 0:
        setattr(parent, name, new)
    else:
        getattr(parent, name)[index] = new
    return changed


@dataclass(frozen=True)
class Mutation:
    """A mutant and what it puts at its path in its (unchanged) function."""

    mutant: Mutant
    function: ast.FunctionDef
    replacement: ast.AST

    def changed(self, in_place: bool = False) -> ast.FunctionDef:
        """The mutant's function (see :func:`replaced`)."""
        return replaced(self.function, self.mutant.path, self.replacement, in_place)


def _statement_path(path: NodePath, function: ast.FunctionDef) -> NodePath:
    """The path of the innermost statement at or above ``path``."""
    for end in range(len(path), 0, -1):
        if isinstance(node_at(function, path[:end]), ast.stmt):
            return path[:end]
    return ()


def _changed_statement(function: ast.FunctionDef, path: NodePath, replacement: ast.AST) -> str:
    """The statement a change is in, as code after it: two changes give the same function
    exactly when they change the same statement to the same code."""
    where = _statement_path(path, function)
    statement = copy.deepcopy(node_at(function, where))
    if where == path:
        return repr(where) + ast.unparse(replacement)
    inner = replaced(statement, path[len(where) :], replacement, in_place=True)  # type: ignore[arg-type]
    return repr(where) + ast.unparse(inner)


def mutations(target: Target, source: str) -> list[Mutation]:
    """Every distinct mutant of ``target``'s function in ``source`` (its module's text)."""
    tree = ast.parse(source)
    function = find_function(tree, target.qualname)
    allowed = mutable_statements(function, target.region)
    seen: set[str] = set()
    found: list[Mutation] = []
    counts: dict[tuple[int, str], int] = {}
    whole = target.region is None or not target.region.anchor
    for path, node, name, replacement in _changes(function, allowed, whole):
        if ast.unparse(node) == ast.unparse(replacement):
            continue
        key = _changed_statement(function, path, replacement)
        if key in seen:
            continue
        seen.add(key)
        line = getattr(node, "lineno", function.lineno)
        counts[line, name] = counts.get((line, name), 0) + 1
        ordinal = counts[line, name]
        suffix = f"#{ordinal}" if ordinal > 1 else ""
        diff = f"{line}: {_one_line(node)}  ->  {_one_line(replacement)}"
        mutant = Mutant(
            f"{target.qualname}:{line}:{name}{suffix}",
            target.target,
            module_file(target.module),
            line,
            getattr(node, "end_lineno", None) or line,
            name,
            path,
            diff,
        )
        found.append(Mutation(mutant, function, replacement))
    return found


def mutants_of(target: Target, source: str) -> list[Mutant]:
    """Every distinct mutant of ``target``'s function in ``source``."""
    return [mutation.mutant for mutation in mutations(target, source)]


def surface_mutants(targets: tuple[Target, ...], root: Path) -> tuple[list[Mutant], list[str]]:
    """Every mutant of ``targets`` in the vLLM under ``root``, and a line per target that is
    not there (a release without it)."""
    mutants: list[Mutant] = []
    missing: list[str] = []
    sources: dict[str, str] = {}
    for target in targets:
        file = root / module_file(target.module)
        try:
            source = sources.setdefault(file.as_posix(), file.read_text(encoding="utf-8"))
            mutants += mutants_of(target, source)
        except (OSError, SurfaceError, RegionNotFound) as error:
            missing.append(f"{target.target}: {error}")
    return mutants, missing
