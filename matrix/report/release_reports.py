"""The per-release JSON reports, loaded: each a :class:`ReleaseReport` keyed by its release
(or ``DEV`` for a vLLM from a checkout or a local wheel), oldest first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matrix.judge.result import CellResult
from matrix.releases import release_key, release_of
from matrix.report.report_data import ReportError as ReportError
from matrix.report.report_data import read_report

# The key of a report written on a vLLM from a checkout or a local wheel (its ``source``):
# it sits beside the releases, whatever version it states, and never replaces one.
DEV = "dev"


@dataclass(frozen=True)
class ReleaseReport:
    """One release env's JSON report, as loaded."""

    release: str  # "0.31", or DEV
    version: str  # as the report states it
    path: Path
    cells: tuple[CellResult, ...]
    matrix_digest: str  # the matrix code that wrote it
    source: str = ""  # a dev build's source, described (see devsource.Source.describe)

    @property
    def label(self) -> str:
        """The release as the tables name it (a dev build with its source)."""
        return (
            f"vLLM {self.version} (dev: {self.source})" if self.source else f"vLLM {self.version}"
        )

    @property
    def skipped(self) -> str | None:
        """Why nothing ran, when every cell was skipped."""
        if self.cells and all(c.observed == "skip" for c in self.cells):
            return self.cells[0].detail
        return None

    def cells_of(self, variant: str) -> dict[str, CellResult]:
        """The report's cells of ``variant``, by case."""
        return {c.case: c for c in self.cells if c.variant == variant}


def load_reports(paths: Sequence[Path], pattern: str = "vllm-*.json") -> dict[str, ReleaseReport]:
    """Reports keyed by release, oldest first; directories contribute their files that match
    ``pattern`` (a suite's release reports)."""
    files = [f for p in paths for f in (sorted(p.glob(pattern)) if p.is_dir() else [p])]
    reports: dict[str, ReleaseReport] = {}
    for path in files:
        read = read_report(path)  # every field checked, or ReportError naming it
        if any("failing_pools" not in c for c in read.data["cells"]):
            # Without them the fidelity checks would compare defaults: refuse, not pass.
            raise ReportError(f"{path}: written by an older matrix (no failing_pools); rerun it")
        info = read.info
        version = str(info.vllm_version)
        source = info.source.describe() if info.source is not None else ""
        release = DEV if source else release_of(version)
        if release in reports:
            raise ReportError(
                f"{path}: a second report for {release} (first: {reports[release].path})"
            )
        reports[release] = ReleaseReport(
            release, version, path, read.cells, info.matrix_digest, source
        )
    dev = reports.pop(DEV, None)
    ordered = dict(sorted(reports.items(), key=lambda item: release_key(item[0])))
    return {**ordered, DEV: dev} if dev else ordered
