"""The per-release JSON reports, loaded: each a :class:`ReleaseReport` keyed by its release
(or ``DEV`` for a vLLM from a checkout or a local wheel), oldest first."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matrix.installed import Source
from matrix.judge.result import CellResult
from matrix.releases import release_key, release_of

# The key of a report written on a vLLM from a checkout or a local wheel (its ``source``):
# it sits beside the releases, whatever version it states, and never replaces one.
DEV = "dev"


class ReportError(Exception):
    """A report file that cannot be used; the message names it."""


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


def load_reports(paths: Sequence[Path]) -> dict[str, ReleaseReport]:
    """Reports keyed by release, oldest first; directories contribute their vllm-*.json."""
    files = [f for p in paths for f in (sorted(p.glob("vllm-*.json")) if p.is_dir() else [p])]
    reports: dict[str, ReleaseReport] = {}
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            version = str(data["vllm_version"])
            cells = tuple(CellResult.from_dict(c) for c in data["cells"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ReportError(f"{path}: not a matrix JSON report ({error})") from None
        if any("failing_pools" not in c for c in data["cells"]):
            # Without them the fidelity checks would compare defaults: refuse, not pass.
            raise ReportError(f"{path}: written by an older matrix (no failing_pools); rerun it")
        source = _source_text(data.get("source"))
        release = DEV if source else release_of(version)
        if release in reports:
            raise ReportError(
                f"{path}: a second report for {release} (first: {reports[release].path})"
            )
        digest = str(data.get("matrix_digest", ""))
        reports[release] = ReleaseReport(release, version, path, cells, digest, source)
    dev = reports.pop(DEV, None)
    ordered = dict(sorted(reports.items(), key=lambda item: release_key(item[0])))
    return {**ordered, DEV: dev} if dev else ordered


def _source_text(source: Any) -> str:
    if not isinstance(source, dict):
        return ""
    return Source(**source).describe()
