"""Results tables: case x variant (expected vs observed) and the upstream PR's summary shape.

Pure: works on :class:`Cell` records, which travel between pytest-xdist workers and the
controller as plain dicts (``Cell.to_dict`` / ``Cell.from_dict``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from matrix.schema import VARIANT_NAMES

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
    observed: str  # "pass", "fail", or "skip" (the release cannot run it; detail says why)
    kind: str  # "finished" or the failure kind
    detail: str
    source: str
    as_expected: bool  # observed matches the case's expectation (see verdict.expectation_met)
    fit: int = 0
    failing_pools: tuple[int, ...] = ()  # the pool sizes whose run failed
    case_digest: str = ""  # see expand.Case.digest

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Cell:
        return cls(**{**data, "failing_pools": tuple(data.get("failing_pools", ()))})


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


def case_table(cells: Sequence[Cell]) -> Table:
    variants = _variants(cells)
    by_case: dict[str, dict[str, Cell]] = {}
    for cell in sort_cells(cells):
        by_case.setdefault(cell.case, {})[cell.variant] = cell
    rows = []
    for case, row in by_case.items():
        mismatch = any(not c.as_expected for c in row.values())
        rows.append(
            [("! " if mismatch else "") + case]
            + [cell_text(row[v]) if v in row else "-" for v in variants]
        )
    return ["case", *variants], rows


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
    matrix_digest: str = ""  # the matrix code that wrote the report (see plugin.matrix_digest)


def markdown_report(cells: Sequence[Cell], info: RunInfo) -> str:
    parts = [f"# KV reservation matrix on vLLM {info.vllm_version or 'unknown'}", ""]
    if info.ships:
        parts += [f"Stock on this release is expected to behave like `{info.ships}`.", ""]
    if any(cell.column for cell in cells):
        parts += ["## Summary (the upstream PR's table)", "", render_markdown(summary_table(cells))]
        parts += [""]
    parts += [
        "## Cases x variants",
        "",
        "`FAIL kind` is the observed failure; `(expected ...)` and a leading `!` mark a cell "
        "that differs from the case's expectation.",
        "",
        render_markdown(case_table(cells)),
    ]
    wrong = mismatches(cells)
    if wrong:
        parts += ["", "## Cells that differ from their expectation", ""]
        parts += [f"- `{c.case}-{c.variant}`: {c.detail}" for c in wrong]
    return "\n".join(parts) + "\n"


def json_report(cells: Sequence[Cell], info: RunInfo) -> dict[str, Any]:
    return {**asdict(info), "cells": [c.to_dict() for c in sort_cells(cells)]}


def write_report(path: Path, cells: Sequence[Cell], info: RunInfo) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        text = json.dumps(json_report(cells, info), indent=2) + "\n"
    elif path.suffix == ".md":
        text = markdown_report(cells, info)
    else:
        raise ValueError(f"--matrix-report {path}: use a .md or .json file name")
    path.write_text(text, encoding="utf-8")
