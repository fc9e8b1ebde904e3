"""The vLLM releases the matrix knows, the variant each ships, and what orders versions.

No vLLM here: the case format, the reports and the cross-version checks read this table
without importing vLLM; ``matrix.adapters.selection`` imports the adapter a release names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from matrix.variant_names import BuiltInVariant


@dataclass(frozen=True)
class Release:
    """A known release: the adapter that drives it and the variant its stock reservation is."""

    adapter: str  # "module:class"
    ships: BuiltInVariant
    # The waiting-request admission around the reservation: a variant patched into a release of
    # another admission meets other code than the stock it is held to (fidelity.py).
    admission: str = "one waiting queue"


# Known releases (major.minor), oldest first. Each adapter subclasses the previous one and
# overrides only what its release changed.
RELEASES: dict[str, Release] = {
    "0.30": Release("matrix.adapters.v0_30:Vllm030", ships="none"),
    "0.31": Release("matrix.adapters.v0_31:Vllm031", ships="original"),
    "0.32": Release("matrix.adapters.v0_32:Vllm032", ships="fixed"),
    "0.33": Release("matrix.adapters.v0_32:Vllm032", ships="fixed"),  # same scheduler shape
    "0.34": Release(
        "matrix.adapters.v0_34:Vllm034",
        ships="fixed",
        admission="two waiting queues, loads-only steps, parked loads",
    ),
}


def release_key(version: str) -> tuple[int, int]:
    """``0.31.2+cpu`` -> ``(0, 31)``: what orders releases."""
    numbers = [int(n) for n in re.findall(r"\d+", version)[:2]]
    numbers += [0] * (2 - len(numbers))
    return numbers[0], numbers[1]


def release_of(version: str) -> str:
    """``0.31.2+cpu`` -> ``0.31``."""
    return "{}.{}".format(*release_key(version))


def newest_release() -> str:
    """The newest release the table knows: the default everywhere a release is not named."""
    return max(RELEASES, key=release_key)


def env_name(release: str, family: str = "vllm") -> str:
    """A release's tox env of ``family`` (``vllm``, ``sweep``, ``upstream``...): ``vllm034``."""
    return family + release.replace(".", "")


def nearest_release(version: str) -> str:
    """The known release an installed version is driven as: itself when known, else the newest
    known release not newer than it (a dev build of the next release is tried as the newest
    known one), else the oldest."""
    key = release_key(version)
    known = sorted(RELEASES, key=release_key)
    older = [r for r in known if release_key(r) <= key]
    return older[-1] if older else known[0]


def shipped_variant(version: str | None, dev_build: bool = False) -> BuiltInVariant:
    """The variant a release ships as its stock reservation; stock is expected to behave
    exactly like it. Without a version nothing runs, and the newest release's is as good as
    any. A dev build (a checkout or a local wheel) is held to the newest release's: a branch
    is expected to keep the fix."""
    newest = newest_release()
    return RELEASES[newest if dev_build else nearest_release(version or newest)].ships


# What the newest known release ships: ids, lines and validation use it when no vLLM is
# installed; whatever judges cells uses the installed release's.
NEWEST_SHIPPED: BuiltInVariant = shipped_variant(None)


def release_label(version: str) -> str:
    """The version, and for a release not in ``RELEASES`` the adapter that drives it."""
    release = nearest_release(version)
    if release_key(version) == release_key(release):
        return version
    return f"{version} (unknown release, driven by the {release} adapter)"


# A vLLM version as its packages and checkouts state it (PEP 440's forms vLLM uses): 0.33.0,
# 0.32.0rc1, 0.10.1.1, 0.6.4.post1, 0.34.0.dev12+g1a2b3c.cpu.
VERSION = re.compile(
    r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[A-Za-z0-9]+([._-][A-Za-z0-9]+)*)?"
)


def label_problem(label: str) -> str | None:
    """Why ``label`` is not what :func:`release_label` writes for a vLLM version (a version,
    and for a release the matrix does not know its adapter's words), or None."""
    version = label.split(" ", 1)[0]
    if VERSION.fullmatch(version) is None:
        return f"{label[:60]!r} is not a vLLM version (such as 0.33.0 or 0.34.0.dev1+g1a2b3c)"
    if release_label(version) != label:
        return f"{label[:80]!r} is not how a report names vLLM {version}"
    return None
