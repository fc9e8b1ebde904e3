"""A release's pins (``requirements/vllm-X.Y.Z.txt``, the lean install, and ``-nodeps.txt``,
vLLM itself), written from another release's, and what the two releases' wheels declare
differently (their ``Requires-Dist``), each change beside the pin the copied file holds. Pure:
texts in, texts out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from matrix.releases import release_of

PINS = re.compile(r"vllm-(\d+(?:\.\d+)+)\.txt")  # the lean install's pins; -nodeps.txt beside
NODEPS = "-nodeps"


@dataclass(frozen=True)
class PinFiles:
    """A release's two pin files, by name under ``requirements/``."""

    version: str

    @property
    def names(self) -> tuple[str, str]:
        """The lean install's pins, then vLLM's own (installed without dependencies)."""
        return f"vllm-{self.version}.txt", f"vllm-{self.version}{NODEPS}.txt"


def pinned_versions(requirements: Path) -> dict[str, str]:
    """Each release's pinned version (the newest where a release has two), from the pin files'
    names."""
    found: dict[str, str] = {}
    for path in requirements.glob("vllm-*.txt"):
        match = PINS.fullmatch(path.name)
        if match:
            version = match.group(1)
            release = release_of(version)
            if release not in found or Version(version) > Version(found[release]):
                found[release] = version
    return found


def _version_pattern(version: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.]){re.escape(version)}(?!\.?\d)")


def copied_pins(text: str, old: str, new: str, source: str) -> str:
    """``text`` (release ``old``'s pin file ``source``) as release ``new``'s: vLLM's pin and
    the comments name ``new``; every other pin is kept, and a first line says where the file
    came from."""
    pattern = _version_pattern(old)
    lines = []
    for line in text.splitlines():
        name = line.split("==", 1)[0].strip()
        if line.lstrip().startswith("#") or canonicalize_name(name) == "vllm":
            line = pattern.sub(new, line)
        lines.append(line)
    header = (
        f"# Written from requirements/{source} by `python -m matrix releases --add {new}`: the "
        f"comments are {old}'s until checked (docs/releases.md)."
    )
    return "\n".join([header, *lines]) + "\n"


def _declared(metadata: str) -> dict[tuple[str, str], Requirement]:
    """A wheel's ``Requires-Dist`` but its extras', by (name, environment marker)."""
    found: dict[tuple[str, str], Requirement] = {}
    for line in Parser().parsestr(metadata).get_all("Requires-Dist") or []:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        marker = str(requirement.marker or "")
        if "extra" in marker:  # an optional extra's: the lean install takes none
            continue
        found[(canonicalize_name(requirement.name), marker)] = requirement
    return found


def _pins(text: str) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in text.splitlines():
        spec = line.split("#", 1)[0].strip()
        if "==" in spec:
            name, version = spec.split("==", 1)
            pins[canonicalize_name(name.strip())] = version.strip()
    return pins


def _against_pin(requirement: Requirement, pins: dict[str, str]) -> str:
    pin = pins.get(canonicalize_name(requirement.name))
    if pin is None:
        return "not pinned"
    try:
        inside = requirement.specifier.contains(Version(pin), prereleases=True)
    except InvalidVersion:
        return f"pinned {pin}"
    return f"pinned {pin}: {'inside' if inside else 'OUTSIDE'} it"


def declared_changes(old: str, new: str, pins_text: str) -> list[str]:
    """What release ``new``'s wheel metadata declares differently from ``old``'s, a line each,
    with the copied pins' version of each changed package (``pins_text``)."""
    before, after = _declared(old), _declared(new)
    pins = _pins(pins_text)
    lines = []
    for key in sorted(set(before) | set(after)):
        name, marker = key
        where = f" ; {marker}" if marker else ""
        if key not in after:
            lines.append(f"- {name}{before[key].specifier}{where}: no longer declared")
        elif key not in before:
            against = _against_pin(after[key], pins)
            lines.append(f"+ {name}{after[key].specifier}{where}: new ({against})")
        elif before[key].specifier != after[key].specifier:
            old_spec, new_spec = before[key].specifier or "any", after[key].specifier or "any"
            against = _against_pin(after[key], pins)
            lines.append(f"~ {name}: {old_spec} -> {new_spec}{where} ({against})")
    return lines
