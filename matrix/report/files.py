"""Report files: cells become Markdown and JSON built from the report's sections, with what the
run was (:class:`RunInfo`). Pure but for reading the installed vLLM's version and source."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from matrix.case.shipped import PACKAGE
from matrix.installed import Source, installed_source, installed_vllm_version
from matrix.judge.result import CellResult, wholly_skipped
from matrix.releases import release_label, shipped_variant
from matrix.report.sections import sections
from matrix.report.tables import (
    mismatches,
    render_markdown,
    render_text,
    sort_cells,
    tightness_table,
)


@dataclass(frozen=True)
class RunInfo:
    """What a report says about the run as a whole."""

    vllm_version: str | None
    ships: str | None = None  # the variant the release's stock reservation is
    matrix_digest: str = ""  # the matrix code that wrote the report (see matrix_digest)
    # A vLLM installed from a checkout or a local wheel (a dev build); None for a release from
    # a package index, and then absent from the JSON, as in reports written before it existed.
    source: Source | None = None


SHARD_FIELD = "shard"  # a shard report's record of its part of the run (report/merge.py)


@dataclass(frozen=True)
class Shard:
    """Which part of a run a report holds: group ``group`` of ``splits``, out of ``selected``
    (every cell's id, ``case-variant``, that the run selected before splitting)."""

    group: int
    splits: int
    selected: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The report's ``shard`` field."""
        return {"group": self.group, "splits": self.splits, "selected": list(self.selected)}


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
    ships = shipped_variant(version, dev_build=source is not None)
    return RunInfo(release_label(version), ships, matrix_digest(), source)


def markdown_report(cells: Sequence[CellResult], info: RunInfo) -> str:
    """The results as a Markdown document: what ran, then every section, then the cells that
    differ from their expectation."""
    parts = [f"# KV reservation matrix on vLLM {info.vllm_version or 'unknown'}", ""]
    if info.source:
        parts += [f"vLLM from the {info.source.describe()}.", ""]
    if info.ships:
        parts += [f"Stock on this release is expected to behave like `{info.ships}`.", ""]
    for section in sections(cells):
        parts += [f"## {section.title}", ""]
        if section.guide:
            parts += [section.guide, ""]
        parts += [render_markdown(section.table), ""]
    wrong = mismatches(cells)
    if wrong:
        parts += ["## Cells that differ from their expectation", ""]
        parts += [f"- `{c.case}-{c.variant}`: {c.detail}" for c in wrong]
        parts += [""]
    return "\n".join(parts[:-1]) + "\n"


def terminal_lines(cells: Sequence[CellResult], info: RunInfo) -> list[str]:
    """The results as the terminal summary shows them: every section as aligned text."""
    lines = [f"vLLM from the {info.source.describe()}"] if info.source else []
    for section in sections(cells):
        lines += ["", section.title, render_text(section.table)]
    wrong = mismatches(cells)
    if wrong:
        lines += ["", f"{len(wrong)} cell(s) differ from their expectation (marked !)"]
    if all(cell.observed == "skip" for cell in cells):
        lines += ["", f"every cell was skipped, so the run fails: {cells[0].detail}"]
    return lines


def summary_lines(cells: Sequence[CellResult], info: RunInfo) -> list[str]:
    """The end of a run in the terminal: the tables, then a failing line for each case or
    model whose every cell was skipped (such a run tested nothing of it, so it fails)."""
    return [
        *terminal_lines(cells, info),
        *(f"matrix: FAILED: {line}" for line in wholly_skipped(list(cells))),
    ]


def json_report(
    cells: Sequence[CellResult], info: RunInfo, shard: Shard | None = None
) -> dict[str, Any]:
    """The results as JSON-ready data: what ran, every cell, and the tightness table; a
    shard's report also says which part of the run it holds."""
    header, rows = tightness_table(cells)
    tightness = {row[0]: dict(zip(header[1:], row[1:], strict=True)) for row in rows}
    info_fields = asdict(info)
    if info.source is None:  # release reports keep the shape they had before dev builds
        del info_fields["source"]
    report = {
        **info_fields,
        "cells": [c.to_dict() for c in sort_cells(cells)],
        "tightness": tightness,
    }
    if shard is not None:
        report[SHARD_FIELD] = shard.to_dict()
    return report


def write_report(
    path: Path, cells: Sequence[CellResult], info: RunInfo, shard: Shard | None = None
) -> None:
    """Writes the Markdown (``.md``) or JSON (``.json``, with ``shard`` when it is one) report
    to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        text = json.dumps(json_report(cells, info, shard), indent=2) + "\n"
    elif path.suffix == ".md":
        text = markdown_report(cells, info)
    else:
        raise ValueError(f"--matrix-report {path}: use a .md or .json file name")
    path.write_text(text, encoding="utf-8")
