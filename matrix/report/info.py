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
    # The suite the cases are (matrix.case.shipped.SUITES: "" the shipped cases), and how the
    # run was narrowed ("--connector offloading -k k1"; "" a whole run): each absent from the
    # JSON when empty, as in reports written before they existed.
    suite: str = ""
    selection: str = ""

    def title(self) -> str:
        """The report's title: ``KV reservation matrix, the connector cases, on vLLM 0.34.0``."""
        words = SUITE_WORDS[self.suite][0]
        return f"KV reservation matrix{f', {words},' if words else ''} on vLLM {self.release}"

    @property
    def release(self) -> str:
        """The release in words (``unknown`` where no vLLM was installed)."""
        return self.vllm_version or "unknown"

    @property
    def command(self) -> str:
        """The command that runs the suite and writes its reports."""
        return SUITE_WORDS[self.suite][1]


# Each suite (matrix.case.shipped.SUITES) in a report's words, and the command that runs it.
SUITE_WORDS = {
    "": ("", "python -m matrix run"),
    "connectors": ("the connector cases", "python -m matrix connectors"),
    "adequacy": ("the adequacy cases", "python -m matrix adequacy"),
    "sweep": ("the layout classes' cells", "python -m matrix sweep --cells"),
}


def matrix_digest() -> str:
    """Identifies the matrix code that wrote a report: reports written by different code are
    never compared with each other."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def run_info(suite: str = "", selection: str = "") -> RunInfo:
    """What the report says of the installed vLLM, from its version alone (under xdist the
    controller never imports vLLM), of the ``suite`` run and of its ``selection``."""
    version = installed_vllm_version()
    if version is None:
        return RunInfo(None, matrix_digest=matrix_digest(), suite=suite, selection=selection)
    source = installed_source()  # up to three git calls: once per report
    ships = stock_expectation(version, source)
    return RunInfo(release_label(version), ships, matrix_digest(), source, suite, selection)
