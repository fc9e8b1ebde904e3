"""A new release's tox envs, written into ``tox.ini``'s text from the newest known release's:
each env family that has an env for every known release (``vllm``, ``sweep``, ``upstream``,
``connectors``: the lists naming them all say which) gets the new release's block, the newest's
copied with the release replaced, and every such list (a label, a ``depends``) names it after
the newest's. Pure: text in, text out; what is there already is left as it is, so it can run
again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from matrix.releases import env_name

HEADER = re.compile(r"^\[testenv:([^\]]+)\]\s*$")
LISTING = re.compile(r"^(\s*[\w-]+\s*=\s*)([\w-]+(?:\s*,\s*[\w-]+)+)\s*$")


@dataclass(frozen=True)
class Added:
    """``tox.ini``'s new text, the envs written and the lists that now name them."""

    text: str
    envs: tuple[str, ...]
    lists: tuple[str, ...]


def families(text: str, known: Iterable[str]) -> list[str]:
    """The env families some list of ``text`` names for every one of the ``known`` releases."""
    releases = list(known)
    found: list[str] = []
    for line in text.splitlines():
        match = LISTING.match(line)
        if not match:
            continue
        items = {item.strip() for item in match.group(2).split(",")}
        for item in items:
            family = re.sub(r"\d+$", "", item)
            if family and family not in found and {env_name(r, family) for r in releases} <= items:
                found.append(family)
    return found


def _header(line: str) -> str | None:
    match = HEADER.match(line)
    return match.group(1) if match else None


def _block(lines: list[str], env: str) -> tuple[int, int] | None:
    """Where ``[testenv:env]`` starts and ends (its last line that is neither blank nor a
    comment: comments before the next header belong to that one)."""
    start = next((i for i, line in enumerate(lines) if _header(line) == env), None)
    if start is None:
        return None
    end = start
    for index in range(start + 1, len(lines)):
        line = lines[index]
        if line.startswith("["):
            break
        if line.strip() and not line.lstrip().startswith("#"):
            end = index
    return start, end + 1


def _renamed(line: str, old: str, new: str, old_version: str, version: str) -> str:
    line = re.sub(rf"(?<=[A-Za-z]){re.escape(old)}\b", new, line)
    return re.sub(rf"(?<![\w.]){re.escape(old_version)}(?!\.?\d)", version, line)


def add_release(
    text: str, known: Iterable[str], newest: str, newest_version: str, version: str, release: str
) -> Added:
    """``text`` with release ``release`` (``version``) beside ``newest`` (``newest_version``),
    the newest known one."""
    lines = text.splitlines()
    old, new = env_name(newest, ""), env_name(release, "")
    written: list[str] = []
    for family in families(text, known):
        source, target = family + old, family + new
        if _block(lines, target) is not None:
            continue
        place = _block(lines, source)
        if place is None:
            continue
        start, end = place
        copy = [
            f"# Written by `python -m matrix releases --add {version}` from {source}'s block.",
            *(_renamed(line, old, new, newest_version, version) for line in lines[start:end]),
        ]
        lines[end:end] = ["", *copy]
        written.append(target)
    lists: list[str] = []
    for index, line in enumerate(lines):
        match = LISTING.match(line)
        if not match:
            continue
        items = [item.strip() for item in match.group(2).split(",")]
        changed = False
        for family in families(line, known):
            source, target = family + old, family + new
            if source in items and target not in items:
                items.insert(items.index(source) + 1, target)
                changed = True
        if changed:
            lines[index] = match.group(1) + ", ".join(items)
            lists.append(match.group(1).strip().rstrip("=").strip())
    return Added("\n".join(lines) + "\n", tuple(written), tuple(lists))
