"""Results: a cell verdict becomes a :class:`Cell` record, cells become tables (case x variant,
expected vs observed, and the upstream PR's summary shape) and reports (terminal, Markdown,
JSON).

Pure: works on :class:`Cell` records, which travel between pytest-xdist workers and the
controller as plain dicts (``Cell.to_dict`` / ``Cell.from_dict``).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from matrix.adapters import installed_vllm_version, release_label, shipped_variant
from matrix.devsource import Source, installed_source
from matrix.expand import CellSpec
from matrix.tightness import over_reservation, tightness_label
from matrix.variant_names import VARIANT_NAMES, BuiltInVariant
from matrix.verdict import CellVerdict, RunKind, expectation_met

Observed = Literal["pass", "fail", "skip"]
CellKind = Literal[RunKind, "skipped"]

# The upstream PR's row names; the other variants keep their own names.
ROW_LABELS = {
    "original": "Original",
    "group_count": "Original x group count",
    "fixed": "This fix",
}
COLUMN_ORDER = (
    "Single group",
    "Multiple groups",
    "Different block sizes",
    "Mamba none",
    "Mamba align",
)


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


def sort_cells(cells: Iterable[Cell]) -> list[Cell]:
    order: dict[str, int] = {name: index for index, name in enumerate(VARIANT_NAMES)}
    return sorted(cells, key=lambda c: (c.case, order.get(c.variant, len(order)), c.variant))


def _variants(cells: Sequence[Cell]) -> list[str]:
    present = {c.variant for c in cells}
    return [v for v in VARIANT_NAMES if v in present] + sorted(present - set(VARIANT_NAMES))


def cell_text(cell: Cell) -> str:
    if cell.observed == "skip":
        return "skip"
    text = "pass" if cell.observed == "pass" else f"FAIL {cell.kind}"
    if not cell.as_expected:
        wanted = cell.expected_kind or cell.expected
        text += f" (expected {wanted})"
    return text


Table = tuple[list[str], list[list[str]]]


def row_label(case: str, mismatch: bool) -> str:
    """A table row's first cell; ``!`` marks a row with a cell against its expectation."""
    return f"! {case}" if mismatch else case


def case_table(cells: Sequence[Cell]) -> Table:
    variants = _variants(cells)
    by_case: dict[str, dict[str, Cell]] = {}
    for cell in sort_cells(cells):
        by_case.setdefault(cell.case, {})[cell.variant] = cell
    rows = []
    for case, row in by_case.items():
        mismatch = any(not c.as_expected for c in row.values())
        rows.append(
            [row_label(case, mismatch)] + [cell_text(row[v]) if v in row else "-" for v in variants]
        )
    return ["case", *variants], rows


def tightness_table(cells: Sequence[Cell]) -> Table:
    """Case x variant: blocks of over-reservation (0 tight), ``stall`` (under-reservation)."""
    variants = _variants(cells)
    by_case: dict[str, dict[str, Cell]] = {}
    for cell in sort_cells(cells):
        by_case.setdefault(cell.case, {})[cell.variant] = cell
    rows = [
        [case] + [tightness_text(row[v]) if v in row else "-" for v in variants]
        for case, row in by_case.items()
    ]
    return ["case", *variants], rows


def tightness_text(cell: Cell) -> str:
    return tightness_label(cell.kind, cell.over_reservation)


def columns_of(cells: Sequence[Cell]) -> list[str]:
    present = {c.column for c in cells if c.column}
    return [c for c in COLUMN_ORDER if c in present] + sorted(present - set(COLUMN_ORDER))


def column_verdict(members: Sequence[Cell]) -> str:
    """Fail if any member fails, Pass if every member that ran passed, Skip if none ran."""
    observed = {c.observed for c in members}
    if "fail" in observed:
        return "Fail"
    return "Pass" if "pass" in observed else "Skip"


def summary_table(cells: Sequence[Cell]) -> Table:
    """Rows are variants, columns the cases' ``column`` labels; a column passes for a variant
    when every case in it that ran passes (see :func:`column_verdict`)."""
    columns = columns_of(cells)
    rows = []
    for variant in _variants(cells):
        row = [ROW_LABELS.get(variant, variant)]
        for column in columns:
            members = [c for c in cells if c.variant == variant and c.column == column]
            if not members:
                row.append("-")
            else:
                row.append(column_verdict(members))
        rows.append(row)
    return ["Implementation", *columns], rows


def models_table(cells: Sequence[Cell]) -> Table:
    """Rows are described models, columns variants: Pass when every cell of the model that
    ran passed, else the failures by kind (many are expected: each case says which)."""
    variants = _variants(cells)
    rows = []
    for model in sorted({c.model for c in cells if c.model}):
        row = [model]
        for variant in variants:
            ran = [c for c in cells if c.model == model and c.variant == variant]
            kinds = Counter(c.kind for c in ran if c.observed == "fail")
            if not kinds:
                row.append(column_verdict(ran) if ran else "-")
            else:
                row.append("Fail: " + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())))
        rows.append(row)
    return ["Model", *[ROW_LABELS.get(v, v) for v in variants]], rows


def render_text(table: Table) -> str:
    header, rows = table
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def render_markdown(table: Table) -> str:
    header, rows = table
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def mismatches(cells: Sequence[Cell]) -> list[Cell]:
    return [c for c in sort_cells(cells) if not c.as_expected]


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
    return RunInfo(release_label(version), expected_stock(), matrix_digest(), installed_source())


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
