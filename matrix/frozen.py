"""``fast_init``: a frozen dataclass whose ``__init__`` costs about what a plain one does.

A frozen dataclass refuses ``__setattr__``, so the ``__init__`` that ``dataclasses`` generates
sets each field through ``object.__setattr__``: about three times the cost of a plain
assignment. The harness makes several such records on every engine step (each request's state,
the scheduler's, the step's record, its block account), so for those the same ``__init__`` is
generated writing the instance's ``__dict__`` directly: the same signature and defaults, and
the instances stay frozen (assigning a field still raises).
"""

from __future__ import annotations

from dataclasses import MISSING, fields, is_dataclass
from typing import Any, TypeVar

Record = TypeVar("Record", bound=type)


def fast_init(cls: Record) -> Record:
    """Replaces a frozen dataclass's ``__init__`` with one that fills ``__dict__`` directly.
    Only for plain records: no ``__slots__``, ``__post_init__``, default factories or fields
    outside ``__init__``."""
    params = getattr(cls, "__dataclass_params__", None)
    if not is_dataclass(cls) or params is None or not params.frozen:
        raise TypeError(f"{cls.__name__} is not a frozen dataclass")
    if "__slots__" in cls.__dict__ or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has __slots__ or __post_init__")
    arguments: list[str] = []
    defaults: dict[str, Any] = {}
    for field in fields(cls):
        if not field.init or field.kw_only or field.default_factory is not MISSING:
            raise TypeError(f"{cls.__name__}.{field.name} is not a plain positional field")
        if field.default is MISSING:
            arguments.append(field.name)
        else:
            defaults[f"_default_{field.name}"] = field.default
            arguments.append(f"{field.name}=_default_{field.name}")
    body = "".join(f"\n    values[{f.name!r}] = {f.name}" for f in fields(cls))
    source = f"def __init__(self, {', '.join(arguments)}):\n    values = self.__dict__{body}\n"
    namespace = dict(defaults)
    exec(source, namespace)  # as dataclasses makes its own __init__
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = {f.name: f.type for f in fields(cls)} | {"return": None}
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
