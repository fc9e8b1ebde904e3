"""What differs between two releases' records of the surface list (``surface_probe``), a line
each: a target gone or moved, a parameter removed or added, a member now of another kind, a
name ``__init__`` no longer sets, a body the adapters call or replace that changed. Pure: reads
two records.

A change is *used* when it touches what a use names (or the target itself): the adapters'
code meets it; the others are the same targets' news, for the adapter's author to judge.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from matrix.adapters.surface import Use, targets

ABSENT = "absent"


@dataclass(frozen=True)
class Change:
    """One difference, in words, and whether the adapters use what it is about."""

    target: str
    words: str
    used: bool

    def line(self) -> str:
        """The change as the probe prints it."""
        return f"{self.target}: {self.words}"


def _parameter_changes(
    target: str, old: list[str], new: list[str], named: set[str]
) -> Iterator[Change]:
    def by_name(parameters: list[str]) -> dict[str, str]:
        return {p.lstrip("*").rstrip("="): p for p in parameters}

    before, after = by_name(old), by_name(new)
    for name, written in before.items():
        if name not in after:
            yield Change(target, f"parameter {written} removed", name in named)
        elif written.endswith("=") and not after[name].endswith("="):
            yield Change(target, f"parameter {name} now required (it had a default)", True)
        elif after[name].endswith("=") and not written.endswith("="):
            yield Change(target, f"parameter {name} now has a default", name in named)
    for name, written in after.items():
        if name not in before:
            required = not written.endswith("=") and not written.startswith("*")
            words = "required" if required else "with a default" if "=" in written else "variadic"
            yield Change(target, f"parameter {written} added ({words})", required or name in named)


def _member_changes(
    target: str, old: Mapping[str, str], new: Mapping[str, str], named: set[str]
) -> Iterator[Change]:
    for name in sorted(set(old) | set(new)):
        if name in named and (name not in old or name not in new):
            continue  # named since one record was written: not a change of vLLM's
        before, after = old.get(name, ABSENT), new.get(name, ABSENT)
        if before == after:
            continue
        if after == ABSENT:
            words = f"gone (was {_a(before)})"
        elif before == ABSENT:
            words = f"new: {_a(after)}"
        else:
            words = f"now {_a(after)} (was {_a(before)})"
        yield Change(f"{target}.{name}", words, name in named)


def _a(kind: str) -> str:
    if kind == "assigned":
        return "an attribute __init__ sets"
    article = "an" if kind[0] in "aeiou" else "a"
    return f"{article} {kind}"


def _assigned_changes(
    target: str, old: dict[str, Any], new: dict[str, Any], named: set[str]
) -> Iterator[Change]:
    if "assigned" not in old or "assigned" not in new:
        return
    # A member's or a parameter's change is said there.
    said = set(old.get("members", {})) & set(new.get("members", {}))
    said |= {p.lstrip("*").rstrip("=") for p in (*old["parameters"], *new["parameters"])}
    before, after = set(old["assigned"]) - said, set(new["assigned"]) - said
    for name in sorted(before - after):
        yield Change(target, f"__init__ no longer sets self.{name}", name in named)
    for name in sorted(after - before):
        yield Change(target, f"__init__ now sets self.{name}", name in named)


def _body_changes(target: str, old: dict[str, Any], new: dict[str, Any]) -> Iterator[Change]:
    if old.get("body") and new.get("body") and old["body"] != new["body"]:
        yield Change(target, "its code changed", True)
    bodies_before, bodies_after = old.get("bodies", {}), new.get("bodies", {})
    for name in sorted(set(bodies_before) & set(bodies_after)):
        if bodies_before[name] and bodies_after[name] and bodies_before[name] != bodies_after[name]:
            yield Change(f"{target}.{name}", "its code changed", True)


def target_changes(
    target: str, old: dict[str, Any], new: dict[str, Any], uses: tuple[Use, ...]
) -> Iterator[Change]:
    """What differs at one target between its two records."""
    if old["kind"] == ABSENT or new["kind"] == ABSENT:
        if old["kind"] != new["kind"]:
            if new["kind"] != ABSENT:
                yield Change(target, f"new ({old.get('error', 'absent')} before)", True)
            elif new.get("moved_to"):
                yield Change(target, f"moved to {new['moved_to']} ({new['error']})", True)
            else:
                yield Change(target, f"gone: {new.get('error', 'absent')}", True)
        return
    if old["kind"] != new["kind"]:
        yield Change(target, f"now a {new['kind']} (was a {old['kind']})", True)
        return
    if old.get("module") != new.get("module"):
        yield Change(target, f"now defined in {new['module']} (was {old['module']})", False)
    named = {name for use in uses for name in use.names()}
    yield from _parameter_changes(target, old["parameters"], new["parameters"], named)
    # A field that is a parameter too is the parameter's change, said once.
    fields = set(old.get("fields", ())) | set(new.get("fields", ()))
    members_before, members_after = (
        {k: v for k, v in record.get("members", {}).items() if k not in fields}
        for record in (old, new)
    )
    yield from _member_changes(target, members_before, members_after, named)
    yield from _assigned_changes(target, old, new, named)
    yield from _body_changes(target, old, new)


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Every difference from record ``old`` to record ``new``, in the surface list's order,
    then targets a record lacks (a list that grew since it was written)."""
    listed = targets()
    found: list[Change] = []
    before, after = old["targets"], new["targets"]
    for target, uses in listed.items():
        if target in before and target in after:
            found += target_changes(target, before[target], after[target], uses)
    for target in listed:
        for record, other in ((old, before), (new, after)):
            if target not in other:
                words = f"not in {record['vllm']}'s record (record it again)"
                found.append(Change(target, words, False))
    return found


def report(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The probe's lines: a heading, then what the adapters use, then the rest."""
    found = changes(old, new)
    used = [c.line() for c in found if c.used]
    other = [c.line() for c in found if not c.used]
    heading = f"vLLM {old['vllm']} -> {new['vllm']}: {len(found)} differences on the surface"
    lines = [f"{heading} the adapters drive (matrix/adapters/surface/)"]
    if used:
        lines += [f"What the adapters use ({len(used)}):", *(f"  {line}" for line in used)]
    if other:
        lines += [f"Beside it, on the same targets ({len(other)}):", *(f"  {x}" for x in other)]
    return lines
