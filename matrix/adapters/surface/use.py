"""One entry of the surface list: what the adapters rely on of one class or function of vLLM's.
Pure data."""

from __future__ import annotations

from dataclasses import dataclass


def target_parts(target: str) -> tuple[str, str]:
    """``"module:qualname"`` (a target of the surface lists, the adapters' and mutate's) as its
    module and its name there."""
    module, _, qualname = target.partition(":")
    return module, qualname


@dataclass(frozen=True)
class Use:
    """What the adapters rely on of one class or function of vLLM's."""

    target: str  # "module:qualname"
    why: str
    # Named parameters passed (for a class: its constructor's).
    parameters: tuple[str, ...] = ()
    # Methods called or replaced on the instance: callable on the class.
    methods: tuple[str, ...] = ()
    # Instance attributes ``__init__`` sets (``self.name = ...``), no method of that name.
    assigned: tuple[str, ...] = ()
    # Read, of any kind: a field, a property, a class attribute, an enum member.
    attributes: tuple[str, ...] = ()
    # Relied on to be absent: no parameter, class attribute or assignment of that name.
    without: tuple[str, ...] = ()

    @property
    def module(self) -> str:
        """The module the target is imported from."""
        return target_parts(self.target)[0]

    @property
    def qualname(self) -> str:
        """The target's name in its module (``Class`` or ``Class.method``)."""
        return target_parts(self.target)[1]

    def names(self) -> tuple[str, ...]:
        """Every member or parameter name this use states something about."""
        return (*self.parameters, *self.methods, *self.assigned, *self.attributes, *self.without)

    def describe(self) -> str:
        """In words, as a refusal names it: ``Scheduler(hash_block_size) (why)``."""
        parts = [f"{self.qualname}({', '.join(self.parameters)})"] if self.parameters else []
        parts += [f"{self.qualname}.{name}()" for name in self.methods]
        parts += [f"{self.qualname}.{name} (set by __init__)" for name in self.assigned]
        parts += [f"{self.qualname}.{name}" for name in self.attributes]
        stated = ", ".join(parts) or self.qualname
        if self.without:
            stated += f" without {', '.join(self.without)}"
        return f"{stated} ({self.why})"
