"""The Models table: "does the fix work for my model?", answered in words per described
model and variant, from how bad its cells' failures are (``matrix.judge.severity``): ``ok``,
``over-reserves 1-7 blocks``, ``unpromotable below the fit at pools 15-16``, ``DEADLOCK at
pools 40-41``, ``sizer: starts at 11, needs 13``. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from matrix.judge.result import CellResult
from matrix.judge.severity import SEVERITY_ORDER
from matrix.judge.verdict import pool_ranges
from matrix.outcomes import Severity
from matrix.report.tables import Table, variants_of
from matrix.variant_names import table_label


def _pools(cells: Sequence[CellResult], severity: Severity) -> str:
    pools = sorted({f.pool for c in cells for f in c.failures if f.severity == severity})
    return pool_ranges(pools)


def _count(cells: Sequence[CellResult]) -> str:
    return "1 cell" if len(cells) == 1 else f"{len(cells)} cells"


def _over(cells: Sequence[CellResult]) -> str:
    blocks = sorted({c.over_reservation for c in cells if c.over_reservation})
    spread = f"{blocks[0]}-{blocks[-1]}" if len(blocks) > 1 else f"{blocks[0]}" if blocks else "?"
    return f"over-reserves {spread} block{'s' if blocks[-1:] != [1] else ''} ({_count(cells)})"


def _sizer(cells: Sequence[CellResult]) -> str:
    pairs = sorted({(c.startable, c.fit) for c in cells})
    shown = ", ".join(f"starts at {s}, needs {f}" for s, f in pairs[:3])
    return f"sizer: {shown}" + (f" (and {len(pairs) - 3} more)" if len(pairs) > 3 else "")


# How each severity reads, given the cells whose worst it is among.
_WORDS: dict[Severity, Callable[[Sequence[CellResult]], str]] = {
    "deadlock": lambda cells: f"DEADLOCK at pools {_pools(cells, 'deadlock')} ({_count(cells)})",
    "leak": lambda cells: f"LEAK ({_count(cells)})",
    "error": lambda cells: f"ERROR ({_count(cells)})",
    "timeout": lambda cells: f"TIMEOUT ({_count(cells)})",
    "sizer": _sizer,
    "unpromotable": lambda cells: (
        f"unpromotable below the fit at pools {_pools(cells, 'unpromotable')} ({_count(cells)})"
    ),
    "over_reservation": _over,
    "expectation": lambda cells: f"a step expectation unmet ({_count(cells)})",
}


def model_words(cells: Sequence[CellResult]) -> str:
    """How one model's cells under one variant fare, the worst first; ``ok`` when no pool an
    engine could have failed, ``skip`` when none ran, ``-`` when there are none."""
    ran = [c for c in cells if c.observed != "skip"]
    if not ran:
        return "skip" if cells else "-"
    parts = []
    for severity in SEVERITY_ORDER:
        having = [c for c in ran if any(f.severity == severity for f in c.failures)]
        if severity in ("leak", "error", "timeout"):
            having = [c for c in ran if c.severity == severity]
        if having and severity in _WORDS:
            parts.append(_WORDS[severity](having))
    return "; ".join(parts) or "ok"


def models_table(cells: Sequence[CellResult]) -> Table:
    """Rows are described models, columns variants: each model's cells in words."""
    variants = variants_of(cells)
    rows = []
    for model in sorted({c.model for c in cells if c.model}):
        of_model = [c for c in cells if c.model == model]
        words = [model_words([c for c in of_model if c.variant == v]) for v in variants]
        rows.append([model, *words])
    return ["Model", *[table_label(v) for v in variants]], rows
