"""The Models table: "does the fix work for my model?", answered in words per described
model and variant, from how bad its cells' failures are (``matrix.judge.severity``): ``ok``,
``over-reserves 1-7 blocks``, ``unpromotable below the fit at pools 15-16``, ``DEADLOCK at
pools 40-41``, ``sizer: starts at 11, needs 13``; and its brief form, the worst severity in a
word or two (``over-reserves``, ``DEADLOCK``), with those words listed as details. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from matrix.judge.result import CellResult
from matrix.judge.severity import SEVERITY_ORDER
from matrix.judge.verdict import pool_ranges
from matrix.outcomes import UNSUPPORTED, Severity
from matrix.report.tables import BRIEF, Table, variants_of
from matrix.wording import plural


def _pools(cells: Sequence[CellResult], severity: Severity) -> str:
    pools = sorted({f.pool for c in cells for f in c.failures if f.severity == severity})
    return f"pool{'s' if len(pools) > 1 else ''} {pool_ranges(pools)}"


def _count(cells: Sequence[CellResult]) -> str:
    return plural(len(cells), "cell")


def _least_over(cell: CellResult) -> int:
    """A cell's over-reservation, or, where the largest pool swept was still refused, the
    least it can be: one more than that pool's distance from the fit."""
    if cell.over_reservation is not None:
        return cell.over_reservation
    refused = [f.pool for f in cell.failures if f.severity == "over_reservation"]
    return max(refused, default=cell.fit) - cell.fit + 1


def _over(cells: Sequence[CellResult]) -> str:
    """``over-reserves 1-7 blocks``; ``2+``: at least 2, the sweep's largest pool was refused."""
    blocks = sorted({_least_over(c) for c in cells if _least_over(c) > 0}) or [1]
    open_ended = any(c.over_reservation is None for c in cells)
    spread = f"{blocks[0]}-{blocks[-1]}" if len(blocks) > 1 else f"{blocks[0]}"
    ending = "s" if blocks != [1] or open_ended else ""  # "1 block", "1+ blocks", "1-7 blocks"
    return f"over-reserves {spread}{'+' if open_ended else ''} block{ending} ({_count(cells)})"


def _sizer(cells: Sequence[CellResult]) -> str:
    pairs = sorted({(c.startable, c.fit) for c in cells})
    shown = ", ".join(f"starts at {s}, needs {f}" for s, f in pairs[:3])
    return f"sizer: {shown}" + (f" (and {len(pairs) - 3} more)" if len(pairs) > 3 else "")


# How each severity reads, given the cells whose worst it is among.
_WORDS: dict[Severity, Callable[[Sequence[CellResult]], str]] = {
    "deadlock": lambda cells: f"DEADLOCK at {_pools(cells, 'deadlock')} ({_count(cells)})",
    "leak": lambda cells: f"LEAK ({_count(cells)})",
    "protocol": lambda cells: f"PROTOCOL ({_count(cells)})",
    "error": lambda cells: f"ERROR ({_count(cells)})",
    "timeout": lambda cells: f"TIMEOUT ({_count(cells)})",
    "sizer": _sizer,
    "unpromotable": lambda cells: (
        f"unpromotable below the fit at {_pools(cells, 'unpromotable')} ({_count(cells)})"
    ),
    "over_reservation": _over,
    "decision": lambda cells: f"decides otherwise than its release's rule ({_count(cells)})",
    "expectation": lambda cells: f"a step expectation unmet ({_count(cells)})",
}


def _by_severity(cells: Sequence[CellResult]) -> list[tuple[Severity, list[CellResult]]]:
    """Each severity some cell has a pool of (worst first), with those cells; a leak, an error
    or a timeout counts where it is the cell's own."""
    found = []
    for severity in SEVERITY_ORDER:
        having = [c for c in cells if any(f.severity == severity for f in c.failures)]
        if severity in ("leak", "protocol", "error", "timeout"):
            having = [c for c in cells if c.severity == severity]
        if having and severity in _WORDS:
            found.append((severity, having))
    return found


def model_words(cells: Sequence[CellResult], brief: bool = False) -> str:
    """How one model's cells under one variant fare, the worst first (``brief``: the worst
    alone, in a word or two); ``ok`` when no pool an engine could have failed, ``unsupported``
    when none ran, ``-`` when there are none."""
    ran = [c for c in cells if c.observed != "skip"]
    if not ran:
        return UNSUPPORTED if cells else "-"
    found = _by_severity(ran)
    if brief:
        return BRIEF[found[0][0]] if found else "ok"
    return "; ".join(_WORDS[severity](having) for severity, having in found) or "ok"


def models_table(cells: Sequence[CellResult], brief: bool = False) -> Table:
    """Rows are described models, columns variants: each model's cells in words (``brief``:
    its worst severity in a word or two)."""
    variants = variants_of(cells)
    rows = []
    for model in sorted({c.model for c in cells if c.model}):
        of_model = [c for c in cells if c.model == model]
        words = [model_words([c for c in of_model if c.variant == v], brief) for v in variants]
        rows.append([model, *words])
    return ["Model", *variants], rows


def model_details(table: Table) -> list[str]:
    """What the brief Models table leaves out, a line per model and wording: the variants
    that share it, then the words (``ok`` left out); ``table`` is the full
    :func:`models_table`."""
    header, rows = table
    lines = []
    for row in rows:
        shared: dict[str, list[str]] = {}
        for variant, words in zip(header[1:], row[1:], strict=True):
            if words not in ("ok", "-"):
                shared.setdefault(words, []).append(variant)
        lines += [f"{row[0]} under {', '.join(vs)}: {words}" for words, vs in shared.items()]
    return lines
