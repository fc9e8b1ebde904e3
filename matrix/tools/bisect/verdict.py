"""What ``bisect`` compares between commits: the verdict of the chosen cells of one case file,
and the command that computes it in a fresh interpreter whose vLLM is one commit's tree
(``python -m matrix.tools.bisect.verdict``, started by :mod:`matrix.tools.bisect.step`).

A cell's verdict is what the results table shows of it: pass or fail, the failure kind, and
the pool sizes that failed (``stall at pools 17-18``). Two commits give the same verdict when
every chosen cell has the same three; the detail text, the fit and the severity are shown but
not compared. A cell skipped (the commit lacks what the adapter drives) or past its time limit
(which depends on the machine) has no verdict: the commit is skipped, with that reason.

Choosing the cells, reading and comparing verdicts is pure; only :func:`main` imports vLLM.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from matrix.case.expansion import Cell, cells_from_file
from matrix.case.loading import CaseFileError
from matrix.judge.verdict import pool_ranges


class SelectionError(Exception):
    """A case file or cell choice that cannot be bisected; the message is one line."""


def select_cells(case: Path, variant: str, cell_ids: Sequence[str] = ()) -> list[Cell]:
    """The cells of ``case`` to bisect: those named by ``cell_ids`` (test ids, as the results
    table and ``-k`` show them), else every cell of ``variant``."""
    try:
        cells = cells_from_file(case)
    except CaseFileError as error:
        raise SelectionError(str(error)) from None
    if cell_ids:
        by_id = {cell.test_id: cell for cell in cells}
        unknown = [name for name in cell_ids if name not in by_id]
        if unknown:
            raise SelectionError(
                f"{case}: no cell {', '.join(unknown)}; its cells: {', '.join(by_id)}"
            )
        return [by_id[name] for name in dict.fromkeys(cell_ids)]
    chosen = [cell for cell in cells if cell.variant == variant]
    if not chosen:
        variants = sorted({cell.variant for cell in cells})
        raise SelectionError(f"{case}: no {variant} cell; its variants: {', '.join(variants)}")
    return chosen


@dataclass(frozen=True)
class CellVerdict:
    """One cell's verdict on one commit."""

    cell: str  # the test id, ``two_inflight_loads-stock``
    observed: str  # pass, fail, or skip (the commit cannot run it)
    kind: str  # finished, a failure kind, or skipped
    failing_pools: tuple[int, ...]
    detail: str

    @property
    def compared(self) -> tuple[str, str, tuple[int, ...]]:
        """What two commits must share to give the same verdict."""
        return self.observed, self.kind, self.failing_pools

    def no_verdict(self) -> str | None:
        """Why this cell says nothing about the commit's code (skipped, or past its time
        limit, which depends on the machine), or None."""
        if self.observed == "skip":
            return f"{self.cell} skipped: {self.detail}"
        if self.kind == "timeout":
            return f"{self.cell} timed out (a limit on the machine's time): {self.detail}"
        return None

    def describe(self) -> str:
        """``pass``, or ``stall at pools 17-18``."""
        if self.observed != "fail":
            return self.observed
        return f"{self.kind} at pools {pool_ranges(self.failing_pools)}"

    @classmethod
    def from_result(cls, result: dict[str, Any]) -> CellVerdict:
        """The verdict in a ``CellResult.to_dict()`` record (a report's cell)."""
        return cls(
            f"{result['case']}-{result['variant']}",
            result["observed"],
            result["kind"],
            tuple(result.get("failing_pools", ())),
            result["detail"],
        )


Verdicts = tuple[CellVerdict, ...]


def same(one: Verdicts, other: Verdicts) -> bool:
    """Whether two commits give the same verdict: the same cells, each with the same
    :attr:`CellVerdict.compared`."""
    return [(v.cell, v.compared) for v in one] == [(v.cell, v.compared) for v in other]


def describe(verdicts: Verdicts) -> str:
    """The verdicts in one line: one for all cells when they agree, else one per cell."""
    said = {v.describe() for v in verdicts}
    if len(said) == 1:
        return said.pop() + (f" (all {len(verdicts)} cells)" if len(verdicts) > 1 else "")
    return "; ".join(f"{v.cell}: {v.describe()}" for v in verdicts)


def dump(verdicts: Verdicts) -> list[dict[str, Any]]:
    """JSON-ready verdicts (:func:`load` reads them back)."""
    return [asdict(v) for v in verdicts]


def load(data: list[dict[str, Any]]) -> Verdicts:
    """Verdicts :func:`dump` wrote."""
    return tuple(
        CellVerdict(**{**item, "failing_pools": tuple(item["failing_pools"])}) for item in data
    )


def main(argv: list[str] | None = None) -> int:
    """Runs the chosen cells on the vLLM this interpreter imports and writes their results
    (``CellResult`` records) and the vLLM version as JSON to ``--out``."""
    parser = argparse.ArgumentParser(prog="python -m matrix.tools.bisect.verdict")
    parser.add_argument("case", type=Path)
    parser.add_argument("--variant", default="stock")
    parser.add_argument("--cell", action="append", default=[])
    parser.add_argument("--out", type=Path, required=True)
    options = parser.parse_args(argv)
    cells = select_cells(options.case, options.variant, options.cell)
    from matrix.adapters.selection import adapter_or_refusal
    from matrix.installed import installed_vllm_version
    from matrix.judge.result import result_of, skipped_result
    from matrix.judge.verdict import judge_run
    from matrix.run.cell import run_cell

    adapter = adapter_or_refusal()
    results = []
    for cell in cells:
        reason = adapter.unsupported(cell.case.definition)
        if reason:
            results.append(skipped_result(cell, reason))
        else:
            results.append(result_of(cell, judge_run(run_cell(adapter, cell))))
    document = {"vllm": installed_vllm_version(), "cells": [r.to_dict() for r in results]}
    options.out.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
