"""Results: a cell verdict becomes a :class:`Cell` record, cells become report files (Markdown,
JSON) built from matrix/tables.py's tables, with what the run was (:class:`RunInfo`).

Pure: works on :class:`Cell` records, which travel between pytest-xdist workers and the
controller as plain dicts (``Cell.to_dict`` / ``Cell.from_dict``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from matrix.adapters import installed_vllm_version, release_label, shipped_variant
from matrix.devsource import Source, installed_source
from matrix.expand import CellSpec
from matrix.tables import (
    case_table,
    mismatches,
    models_table,
    render_markdown,
    sort_cells,
    summary_table,
    tightness_table,
)
from matrix.tightness import over_reservation
from matrix.variant_names import BuiltInVariant
from matrix.verdict import CellVerdict, RunKind, expectation_met

Observed = Literal["pass", "fail", "skip"]
CellKind = Literal[RunKind, "skipped"]


@dataclass(frozen=True)
class Cell:
    case: str
    column: str | None
    variant: str
    expected: str  # "pass" or "fail"
    expected_kind: str | None  # a failure kind the case pinned, if any
    observed: Observed  # "skip": the release cannot run it; detail says why
    kind: CellKind  # "finished", the failure kind, or "skipped"
    detail: str
    source: str
    as_expected: bool  # observed matches the case's expectation (see verdict.expectation_met)
    fit: int = 0
    failing_pools: tuple[int, ...] = ()  # the pool sizes whose run failed
    case_digest: str = ""  # see expand.Case.digest
    model: str | None = None  # the described model a case runs (see model_schema)
    # Blocks reserved beyond need: the smallest pool from which every size finishes, minus
    # the fit (see matrix/tightness.py); None when the largest pool swept does not finish.
    over_reservation: int | None = None

    def to_dict(self) -> dict[str, Any]:
        # Cells of hand-written layouts keep the shape reports had before models.
        return {k: v for k, v in asdict(self).items() if k != "model" or v is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Cell:
        return cls(**{**data, "failing_pools": tuple(data.get("failing_pools", ()))})


def make_cell(spec: CellSpec, outcome: CellVerdict | str) -> Cell:
    """A table cell from a verdict, or from the reason the cell was skipped."""
    pinned_kind = spec.expected not in ("pass", "fail")
    failing_pools: tuple[int, ...] = ()
    fit = 0
    digest = spec.case.digest
    over: int | None = None
    observed: Observed
    kind: CellKind
    if isinstance(outcome, str):
        observed, kind, detail, as_expected = "skip", "skipped", outcome, True
    else:
        observed, kind, detail = outcome.observed, outcome.kind, outcome.detail
        as_expected = expectation_met(spec.expected, outcome)
        fit, failing_pools = outcome.fit, outcome.failing_pools
        if outcome.layout_digest:  # what ran depends on the release's derivation too
            digest = f"{digest}+{outcome.layout_digest}"
        over = over_reservation(outcome.outcomes, outcome.fit)
    return Cell(
        case=spec.case.case_id,
        column=spec.case.column,
        variant=spec.variant,
        expected="fail" if pinned_kind else spec.expected,
        expected_kind=spec.expected if pinned_kind else None,
        observed=observed,
        kind=kind,
        detail=detail,
        source=f"{spec.case.source.name}:{spec.line}",
        as_expected=as_expected,
        fit=fit,
        failing_pools=failing_pools,
        case_digest=digest,
        model=spec.case.spec.model if spec.case.spec.described is not None else None,
        over_reservation=over,
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


def matrix_digest() -> str:
    """Identifies the matrix code that wrote a report: reports written by different code are
    never compared with each other."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def expected_stock() -> BuiltInVariant:
    """The variant stock is held to on the installed vLLM (see ``shipped_variant``)."""
    return shipped_variant(installed_vllm_version(), dev_build=installed_source() is not None)


def run_info() -> RunInfo:
    """What the report says of the installed vLLM, from its version alone: under xdist the
    controller never imports vLLM."""
    version = installed_vllm_version()
    if version is None:
        return RunInfo(None, matrix_digest=matrix_digest())
    source = installed_source()  # up to three git calls: once per report
    ships = shipped_variant(version, dev_build=source is not None)
    return RunInfo(release_label(version), ships, matrix_digest(), source)


def markdown_report(cells: Sequence[Cell], info: RunInfo) -> str:
    parts = [f"# KV reservation matrix on vLLM {info.vllm_version or 'unknown'}", ""]
    if info.source:
        parts += [f"vLLM from the {info.source.describe()}.", ""]
    if info.ships:
        parts += [f"Stock on this release is expected to behave like `{info.ships}`.", ""]
    if any(cell.column for cell in cells):
        parts += ["## Summary (the upstream PR's table)", "", render_markdown(summary_table(cells))]
        parts += [""]
    if any(cell.model for cell in cells):
        parts += ["## Models", "", render_markdown(models_table(cells)), ""]
    parts += [
        "## Cases x variants",
        "",
        "`FAIL kind` is the observed failure; `(expected ...)` and a leading `!` mark a cell "
        "that differs from the case's expectation.",
        "",
        render_markdown(case_table(cells)),
    ]
    parts += [
        "",
        "## Tightness",
        "",
        "Blocks reserved beyond need: the smallest pool from which every size finishes, minus "
        "the fit (0 is tight); `stall` is under-reservation; `unfinished`: the largest pool "
        "swept did not finish.",
        "",
        render_markdown(tightness_table(cells)),
    ]
    wrong = mismatches(cells)
    if wrong:
        parts += ["", "## Cells that differ from their expectation", ""]
        parts += [f"- `{c.case}-{c.variant}`: {c.detail}" for c in wrong]
    return "\n".join(parts) + "\n"


def json_report(cells: Sequence[Cell], info: RunInfo) -> dict[str, Any]:
    header, rows = tightness_table(cells)
    tightness = {row[0]: dict(zip(header[1:], row[1:], strict=True)) for row in rows}
    info_fields = asdict(info)
    if info.source is None:  # release reports keep the shape they had before dev builds
        del info_fields["source"]
    return {
        **info_fields,
        "cells": [c.to_dict() for c in sort_cells(cells)],
        "tightness": tightness,
    }


def write_report(path: Path, cells: Sequence[Cell], info: RunInfo) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        text = json.dumps(json_report(cells, info), indent=2) + "\n"
    elif path.suffix == ".md":
        text = markdown_report(cells, info)
    else:
        raise ValueError(f"--matrix-report {path}: use a .md or .json file name")
    path.write_text(text, encoding="utf-8")
