"""A mutant compiled into the running vLLM: its function recompiled from the changed syntax
tree, keeping the file's line numbers (coverage, tracebacks and the mutant's line agree), and
set on its class. Only ever done in a forked child: the class is changed for good.

A method is compiled inside a class named like its own (private names mangle the same), and
its ``__class__`` cell is then pointed at the real class, so a zero-argument ``super()``
(``MambaManager.get_num_blocks_to_allocate``) finds the real parent.
"""

from __future__ import annotations

import ast
import importlib
import types
from typing import Any


class InstallError(Exception):
    """The mutant does not fit the installed files (another release, an edited file)."""


def _code_named(code: types.CodeType, name: str) -> types.CodeType:
    for const in code.co_consts:
        if isinstance(const, types.CodeType) and const.co_name == name:
            return const
    raise InstallError(f"no code object {name} in the compiled mutant")


def compile_method(function: ast.FunctionDef, owner: type, filename: str) -> types.FunctionType:
    """``function`` compiled as a method of ``owner``, with the module's globals and the
    original's defaults."""
    shell = ast.ClassDef(
        name=owner.__name__, bases=[], keywords=[], body=[function], decorator_list=[]
    )
    ast.copy_location(shell, function)
    function.decorator_list = []
    module = ast.Module(body=[shell], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, filename, "exec")
    method_code = _code_named(_code_named(code, owner.__name__), function.name)
    original = _plain(owner.__dict__[function.name])
    cells = tuple(
        types.CellType(owner) if name == "__class__" else _original_cell(original, name)
        for name in method_code.co_freevars
    )
    compiled = types.FunctionType(
        method_code, original.__globals__, function.name, original.__defaults__, cells
    )
    compiled.__kwdefaults__ = original.__kwdefaults__
    compiled.__qualname__ = original.__qualname__
    compiled.__annotations__ = original.__annotations__
    return compiled


def _plain(member: Any) -> types.FunctionType:
    function = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
    if not isinstance(function, types.FunctionType):
        raise InstallError(f"{member!r} is not a plain function")
    return function


def _original_cell(original: types.FunctionType, name: str) -> types.CellType:
    names = original.__code__.co_freevars
    if name not in names or original.__closure__ is None:
        raise InstallError(f"{original.__qualname__}: no free variable {name} to carry over")
    return original.__closure__[names.index(name)]


def install(target: str, function: ast.FunctionDef) -> None:
    """Sets ``function`` (a mutant's, parsed from the installed file) as ``target``
    (``module:Class.method``), in this process; ``function``'s tree is used up."""
    module_name, _, qualname = target.partition(":")
    module = importlib.import_module(module_name)
    *classes, name = qualname.split(".")
    owner: Any = module
    for class_name in classes:
        owner = getattr(owner, class_name)
    if not isinstance(owner, type):
        raise InstallError(f"{target}: only methods are mutated")
    member = owner.__dict__[name]
    compiled = compile_method(function, owner, str(module.__file__))
    wrapped: Any = compiled
    if isinstance(member, staticmethod):
        wrapped = staticmethod(compiled)
    elif isinstance(member, classmethod):
        wrapped = classmethod(compiled)
    setattr(owner, name, wrapped)
