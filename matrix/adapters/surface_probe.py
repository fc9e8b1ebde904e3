"""The installed vLLM's shape at every target of the surface list (``surface``): whether each
use holds (what the adapters' requirements ask), and a record of each target as it is (its
parameters, its members' kinds, the names its ``__init__`` sets, a digest of each body the
adapters call or replace; for a class whose instances they call into, its other methods
too), written per release as ``matrix/adapters/surfaces/vllm-<version>.json``.

vLLM is imported here, lazily, target by target: a module that cannot be imported (a release
that moved or dropped it, or a dependency the lean pins lack) is recorded as such, never raised.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import enum
import functools
import hashlib
import importlib
import inspect
import json
import logging
import os
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from matrix.adapters.surface import Use, targets

SNAPSHOTS = Path(__file__).resolve().parent / "surfaces"
ABSENT = "absent"


def snapshot_path(version: str, folder: Path = SNAPSHOTS) -> Path:
    """Where release ``version``'s record is kept."""
    return folder / f"vllm-{version}.json"


def _quiet_offline() -> None:
    """What a probe needs before vLLM's import: offline, quiet (no start-up hooks: a new
    release may lack what they call)."""
    from matrix.adapters.runtime import OFFLINE
    from matrix.installed import vllm_cache_root

    for variable, value in OFFLINE.items():
        os.environ.setdefault(variable, value)
    os.environ.setdefault("VLLM_CACHE_ROOT", str(vllm_cache_root()))
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    logging.getLogger("torch._library.triton").setLevel(logging.ERROR)
    logging.getLogger("vllm").setLevel(logging.ERROR)


class Unresolved(Exception):
    """A target that is not where the list says; the message is one line."""


def resolve(target: str) -> Any:
    """The object at ``module:qualname``; :class:`Unresolved` when it is not there."""
    module_name, _, qualname = target.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as error:  # any import failure is the release's answer, recorded
        raise Unresolved(f"cannot import {module_name}: {type(error).__name__}: {error}") from None
    for part in qualname.split("."):
        if not hasattr(found, part):
            raise Unresolved(f"{module_name} has no {qualname}")
        found = getattr(found, part)
    return found


def parameters(obj: Any) -> tuple[str, ...] | None:
    """A callable's (a class's: its constructor's) parameters, ``name`` when required,
    ``name=`` with a default, ``*name`` and ``**name``; ``self`` and ``cls`` left out."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    named = []
    for parameter in signature.parameters.values():
        if parameter.name in ("self", "cls"):
            continue
        if parameter.kind is parameter.VAR_POSITIONAL:
            named.append(f"*{parameter.name}")
        elif parameter.kind is parameter.VAR_KEYWORD:
            named.append(f"**{parameter.name}")
        else:
            default = parameter.default is not parameter.empty
            named.append(f"{parameter.name}=" if default else parameter.name)
    return tuple(named)


def parameter_names(obj: Any) -> frozenset[str]:
    """The names ``obj`` accepts as keywords (or positionally)."""
    return frozenset(p.rstrip("=") for p in parameters(obj) or () if not p.startswith("*"))


def fields(cls: Any) -> frozenset[str]:
    """A record class's fields: a dataclass's (pydantic's too), a msgspec struct's, a named
    tuple's."""
    if dataclasses.is_dataclass(cls):
        return frozenset(f.name for f in dataclasses.fields(cls))
    named = getattr(cls, "__struct_fields__", None) or getattr(cls, "_fields", None) or ()
    return frozenset(n for n in named if isinstance(n, str))


def _init_source(cls: type) -> ast.AST | None:
    init = cls.__dict__.get("__init__") if isinstance(cls, type) else None
    if init is None or not inspect.isfunction(init):
        return None
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(init)))
    except (OSError, TypeError, SyntaxError):
        return None


def _self_targets(node: ast.AST) -> Iterable[str]:
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            yield node.attr
    elif isinstance(node, (ast.Tuple, ast.List)):
        for element in node.elts:
            yield from _self_targets(element)


@functools.cache
def own_assigned(cls: type) -> frozenset[str] | None:
    """The names the class's own ``__init__`` sets on ``self`` (read from its source; without
    the source, the attribute names its code uses); None when it defines none."""
    tree = _init_source(cls)
    if tree is not None:
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    names.update(_self_targets(target))
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                names.update(_self_targets(node.target))
        return frozenset(names)
    init = cls.__dict__.get("__init__") if isinstance(cls, type) else None
    return frozenset(init.__code__.co_names) if inspect.isfunction(init) else None


def assigned_names(cls: type) -> frozenset[str]:
    """The names the ``__init__`` of the class and its bases set on ``self``."""
    return frozenset().union(*(own_assigned(k) or () for k in getattr(cls, "__mro__", ())))


def member_kind(cls: Any, name: str) -> str:
    """What ``name`` is on ``cls``: method, property, field, enum member, attribute (of the
    class), assigned (set by ``__init__`` only) or absent."""
    try:
        static = inspect.getattr_static(cls, name)
    except AttributeError:
        if name in fields(cls):
            return "field"
        return "assigned" if isinstance(cls, type) and name in assigned_names(cls) else ABSENT
    if isinstance(static, (property, functools.cached_property)):
        return "property"
    if name in fields(cls):
        return "field"
    if isinstance(cls, enum.EnumMeta) and isinstance(static, cls):
        return "enum member"
    if isinstance(static, (staticmethod, classmethod)) or callable(static):
        return "method"
    return "attribute"


def holds(use: Use) -> bool:
    """Whether the installed vLLM has what ``use`` states."""
    try:
        obj = resolve(use.target)
    except Unresolved:
        return False
    accepted = parameter_names(obj)
    assigned = assigned_names(obj) if isinstance(obj, type) else frozenset()
    return (
        set(use.parameters) <= accepted
        and all(callable(getattr(obj, name, None)) for name in use.methods)
        and all(
            name in assigned and not callable(getattr(obj, name, None)) for name in use.assigned
        )
        and all(member_kind(obj, name) != ABSENT for name in use.attributes)
        and not any(
            name in accepted or hasattr(obj, name) or name in assigned for name in use.without
        )
    )


def body_digest(function: Any) -> str | None:
    """A digest of a function's code as written (its syntax tree: not its comments, layout or
    docstring), or None without its source."""
    function = inspect.unwrap(getattr(function, "__func__", function))
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


def _own_members(cls: type) -> set[str]:
    """The names the class itself defines (not dunders): its methods, properties, class
    attributes."""
    return {name for name in vars(cls) if not name.startswith("__")}


def _moved(qualname: str) -> str | None:
    """The vLLM module (among those imported) that now defines ``qualname``'s first part."""
    head = qualname.split(".")[0]
    for name, module in sorted(sys.modules.items()):
        if name.startswith("vllm.") and module is not None:
            value = getattr(module, head, None)
            if value is not None and getattr(value, "__module__", None) == name:
                return name
    return None


def record_target(target: str, uses: tuple[Use, ...]) -> dict[str, Any]:
    """One target as the installed vLLM has it (see the module's docstring)."""
    try:
        obj = resolve(target)
    except Unresolved as error:
        moved = _moved(target.partition(":")[2])
        return {"kind": ABSENT, "error": str(error), **({"moved_to": moved} if moved else {})}
    entry: dict[str, Any] = {
        "kind": "class" if isinstance(obj, type) else "function",
        "module": getattr(obj, "__module__", None),
        "parameters": list(parameters(obj) or []),
    }
    if not isinstance(obj, type):
        entry["body"] = body_digest(obj)
        return entry
    named = {name for use in uses for name in use.names() if name not in use.parameters}
    # A class whose instances the adapters call into: its other members are news too.
    if any(use.methods or use.assigned for use in uses):
        named |= _own_members(obj)
    entry["members"] = {name: member_kind(obj, name) for name in sorted(named)}
    entry["fields"] = sorted(fields(obj))
    own = own_assigned(obj)
    if own is not None:
        entry["assigned"] = sorted(own)
    methods = sorted({name for use in uses for name in use.methods})
    entry["bodies"] = {
        name: body_digest(getattr(obj, name)) for name in methods if hasattr(obj, name)
    }
    return entry


def record(version: str) -> dict[str, Any]:
    """Every target of the surface list as the installed vLLM (``version``) has it."""
    _quiet_offline()
    listed = targets()
    for target in listed:  # import every module first, so a moved class can be found
        with contextlib.suppress(Exception):  # recorded with the target
            importlib.import_module(target.partition(":")[0])
    return {
        "vllm": version,
        "targets": {target: record_target(target, uses) for target, uses in listed.items()},
    }


def write_snapshot(snapshot: dict[str, Any], folder: Path = SNAPSHOTS) -> Path:
    """Writes a release's record (sorted keys, a line per value), atomically."""
    path = snapshot_path(str(snapshot["vllm"]), folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    partial.replace(path)
    return path


def recorded_versions(folder: Path = SNAPSHOTS) -> list[str]:
    """The releases with a record, in no order."""
    return [p.name[len("vllm-") : -len(".json")] for p in folder.glob("vllm-*.json")]


def read_snapshot(path: Path) -> dict[str, Any]:
    """A record written by :func:`write_snapshot` (the repository's own file)."""
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded
