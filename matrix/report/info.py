"""What a report says of the run as a whole (:class:`RunInfo`): the installed vLLM's version
and source, the variant its stock is, and which matrix code wrote the report."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from matrix.case.shipped import PACKAGE
from matrix.installed import (
    Source,
    installed_source,
    installed_vllm_version,
    stock_expectation,
)
from matrix.releases import release_label


@dataclass(frozen=True)
class RunInfo:
    """What a report says about the run as a whole."""

    vllm_version: str | None
    ships: str | None = None  # the variant the release's stock reservation is
    matrix_digest: str = ""  # the matrix code that wrote the report (see matrix_digest)
    # A vLLM installed from a checkout or a local wheel (a dev build); None for a release from
    # a package index, and then absent from the JSON, as in reports written before it existed.
    source: Source | None = None


def matrix_digest() -> str:
    """Identifies the matrix code that wrote a report: reports written by different code are
    never compared with each other."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def run_info() -> RunInfo:
    """What the report says of the installed vLLM, from its version alone: under xdist the
    controller never imports vLLM."""
    version = installed_vllm_version()
    if version is None:
        return RunInfo(None, matrix_digest=matrix_digest())
    source = installed_source()  # up to three git calls: once per report
    ships = stock_expectation(version, source)
    return RunInfo(release_label(version), ships, matrix_digest(), source)
