"""The releases the index serves beside the ones the matrix knows (``RELEASES``), newest first,
each in words: known (its adapter, the variant it ships, its tox env), a known release's other
version, or unknown (the adapter that would drive it); and which are newer than the newest
known release. Pure: the index's versions and the pins in, lines out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.version import Version

from matrix.release_process.index import Served
from matrix.releases import (
    RELEASES,
    env_name,
    nearest_release,
    newest_release,
    release_key,
    release_of,
)


@dataclass(frozen=True)
class Row:
    """A version and its state in words."""

    version: str
    words: str


@dataclass(frozen=True)
class Listing:
    """What ``python -m matrix releases`` prints, and what decides its exit code."""

    rows: tuple[Row, ...]
    left_out: tuple[str, ...]  # a line per kind of version not listed
    newer: tuple[str, ...]  # final, unyanked versions newer than the newest known release


def _adapter(release: str) -> str:
    return RELEASES[release].adapter.rpartition(".")[2]


def _state(version: str, pinned: Mapping[str, str]) -> str:
    release = release_of(version)
    newest = newest_release()
    if release in RELEASES:
        pin = pinned.get(release)
        if pin is not None and Version(pin) == Version(version):
            shipped = RELEASES[release].ships
            return f"known: {_adapter(release)}, stock ships {shipped}; tox -e {env_name(release)}"
        pins = f"the pins are {pin}'s" if pin else "not pinned"
        return f"a {release} release: its adapter ({_adapter(release)}) drives it; {pins}"
    driver = nearest_release(version)
    if release_key(version) > release_key(newest):
        return (
            f"unknown, newer than {newest}: the {driver} adapter ({_adapter(driver)}) would "
            f"drive it; add it: python -m matrix releases --add {version}"
        )
    return f"unknown: the {driver} adapter ({_adapter(driver)}) would drive it"


def listing(
    served: Sequence[Served],
    pinned: Mapping[str, str],
    prereleases: bool = False,
    everything: bool = False,
) -> Listing:
    """The rows for ``served`` (the index's versions) and the known releases, ``pinned`` each
    release's pinned version; pre-releases with ``prereleases``, versions older than the oldest
    known release with ``everything``."""
    oldest = min(RELEASES, key=release_key)
    rows: list[tuple[Version, Row]] = []
    older = pre = 0
    for version in served:
        if version.prerelease and not prereleases:
            pre += 1
            continue
        if release_key(version.version) < release_key(oldest) and not everything:
            older += 1
            continue
        words = _state(version.version, pinned)
        words += " (pre-release)" if version.prerelease else ""
        words += " (yanked)" if version.yanked else ""
        rows.append((version.key, Row(version.version, words)))
    on_index = {release_of(version.version) for version in served}
    for release in RELEASES:
        if release not in on_index:
            pin = pinned.get(release, f"{release}.0")
            rows.append((Version(pin), Row(pin, "known, not on the index")))
    left_out = []
    if older:
        left_out.append(f"{older} older than {oldest}, the oldest known release (--all lists them)")
    if pre:
        left_out.append(f"{pre} pre-releases (--pre lists them)")
    newest = release_key(newest_release())
    newer = tuple(
        v.version
        for v in served
        if not v.prerelease and not v.yanked and release_key(v.version) > newest
    )
    ordered = tuple(row for _, row in sorted(rows, key=lambda pair: pair[0], reverse=True))
    return Listing(ordered, tuple(left_out), newer)


def lines(found: Listing, endpoint: str) -> list[str]:
    """The listing as printed, then the verdict."""
    width = max((len(row.version) for row in found.rows), default=0)
    printed = [
        f"vLLM on {endpoint} beside the matrix's releases (matrix/releases.py), newest first:"
    ]
    printed += [f"  {row.version:<{width}}  {row.words}" for row in found.rows]
    printed += [f"  (left out: {line})" for line in found.left_out]
    newest = newest_release()
    if found.newer:
        names = ", ".join(found.newer)
        printed.append(
            f"matrix releases: the index has {names}, newer than the newest known release "
            f"({newest}): add it (python -m matrix releases --add {found.newer[0]}; "
            "docs/releases.md)"
        )
    else:
        printed.append(f"matrix releases: nothing on the index is newer than {newest}")
    return printed
