"""The model architectures each vLLM release's registry has, as recorded in
``matrix/registry/vllm-<version>.txt`` by ``python -m matrix.tools.record_architectures`` (run
in each release's env): what a model file can be checked against without importing vLLM, and
which release last had an architecture a newer vLLM dropped. No vLLM here.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from matrix.releases import release_key

RECORDS = Path(__file__).resolve().parent / "registry"


def record_path(version: str) -> Path:
    """Where a release's recorded architectures live."""
    return RECORDS / f"vllm-{version}.txt"


@cache
def modules(version: str) -> dict[str, str]:
    """A recorded release's architectures -> the vLLM module defining each (``-``: none)."""
    path = record_path(version)
    if not path.is_file():
        return {}
    rows = (line.split() for line in path.read_text(encoding="utf-8").splitlines())
    return {row[0]: row[1] if len(row) > 1 else "-" for row in rows if row}


@cache
def recorded() -> dict[str, frozenset[str]]:
    """Every recorded release -> its architectures, oldest release first."""
    found = [p.stem.removeprefix("vllm-") for p in RECORDS.glob("vllm-*.txt")]
    return {
        version: frozenset(modules(version))
        for version in sorted(found, key=lambda v: (release_key(v), v))
    }


def known_to(version: str | None) -> frozenset[str] | None:
    """The architectures recorded for ``version``, or None when it was never recorded (a dev
    build: ask its registry)."""
    return recorded().get(version) if version is not None else None


def last_release_with(architecture: str) -> str | None:
    """The newest recorded release whose registry has ``architecture``, or None."""
    having = [version for version, names in recorded().items() if architecture in names]
    return having[-1] if having else None


def dropped(architecture: str, installed: str | None) -> str | None:
    """``0.32.0 was the last release with it`` for an architecture an older release had and the
    installed one lacks, or None."""
    last = last_release_with(architecture)
    if last is None or installed is None or release_key(last) >= release_key(installed):
        return None
    releases = list(recorded())
    return (
        f"vLLM {last} was the last release with it (of the recorded {releases[0]}-{releases[-1]})"
    )
