"""What a report says before its tables: how many cells ran and how they ended, the findings
(cells against their case's expectation, the severe failures, what was skipped whole), and
how to read the tables (words the tables use). Pure: from the cells alone."""

from __future__ import annotations

from collections.abc import Sequence

from matrix.judge.result import CellResult, wholly_skipped
from matrix.outcomes import SEVERE, UNSUPPORTED
from matrix.report.tables import (
    column_row,
    columns_of,
    mismatches,
    unsupported_notes,
    variants_of,
)
from matrix.wording import plural

LISTED = 5  # cells named per finding; the rest are counted
REASONS = 10  # why cells are unsupported, a finding a reason; the rest in the case table


def _names(cells: Sequence[CellResult]) -> str:
    shown = ", ".join(f"`{c.case}-{c.variant}`" for c in cells[:LISTED])
    more = len(cells) - LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def counts_line(cells: Sequence[CellResult]) -> str:
    """``1715 cells (245 cases x 7 variants): 1197 pass, 518 fail; every cell as its case
    expects.``"""
    cases = {c.case for c in cells}
    ran = {
        "pass": sum(1 for c in cells if c.observed == "pass"),
        "fail": sum(1 for c in cells if c.observed == "fail"),
        UNSUPPORTED: sum(1 for c in cells if c.observed == "skip"),
    }
    outcome = ", ".join(f"{n} {name}" for name, n in ran.items() if n)
    wrong = mismatches(cells)
    verdict = (
        f"{plural(len(wrong), 'cell')} against {'its' if len(wrong) == 1 else 'their'} "
        "case's expectation (marked !)"
        if wrong
        else "every cell as its case expects"
    )
    variants = len(variants_of(cells))
    shape = f"{plural(len(cases), 'case')} x {plural(variants, 'variant')}"
    if len(cells) != len(cases) * variants:  # cases that run some of the variants (`variants:`)
        shape = f"{plural(len(cases), 'case')}, each under some of {plural(variants, 'variant')}"
    return f"{plural(len(cells), 'cell')} ({shape}): {outcome}; {verdict}."


def findings(cells: Sequence[CellResult]) -> list[str]:
    """The findings, a line each: cells against their expectation, the severe failures (even
    where expected), cases or models whose every cell was skipped, and why cells are
    unsupported (a line a reason, the first few)."""
    found = []
    wrong = mismatches(cells)
    if wrong:
        found.append(
            f"{plural(len(wrong), 'cell')} against the case's expectation: {_names(wrong)}."
        )
    for severity in SEVERE:
        having = [c for c in cells if c.severity == severity]
        if having:
            variants = ", ".join(dict.fromkeys(c.variant for c in having))
            expected = "all as their cases expect" if all(c.as_expected for c in having) else ""
            note = f" ({expected})" if expected else ""
            found.append(
                f"{severity}: {plural(len(having), 'cell')} under {variants}{note}: "
                f"{_names(having)}."
            )
    found += [f"{line}." for line in wholly_skipped(list(cells))]
    if not found:
        found.append(
            "Every cell is as its case expects, and none deadlocks, leaks, errs, times out or "
            "hits vLLM's sizer."
        )
    reasons = unsupported_notes(cells)
    found += [f"{note.rstrip('.')}." for note in reasons[:REASONS]]
    if len(reasons) > REASONS:
        found.append(
            f"{UNSUPPORTED}: {plural(len(reasons) - REASONS, 'other reason')}, each beside its "
            "cells in the Cases x variants table."
        )
    return found


def _listed(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _stalls(cells: Sequence[CellResult]) -> list[CellResult]:
    """The models' cells with a pool whose severity is ``unpromotable``."""
    return [c for c in cells if c.model and any(f.severity == "unpromotable" for f in c.failures)]


def _below_startable(cell: CellResult) -> bool:
    """Whether every unpromotable pool of the cell lies below its ``startable``."""
    pools = [f.pool for f in cell.failures if f.severity == "unpromotable"]
    return cell.startable is not None and max(pools) < cell.startable


def summary_and_models(cells: Sequence[CellResult]) -> str:
    """The sentence that reconciles a Summary column's Pass with a model's ``unpromotable``
    under the same variant, from the cells: where those stalls lie against ``startable``
    (empty where no variant has both)."""
    columns = columns_of(cells)
    under = {v: [c for c in cells if c.variant == v] for v in variants_of(cells)}
    both = [v for v, own in under.items() if "Pass" in column_row(own, columns) and _stalls(own)]
    if not both:
        return ""
    variant = "stock" if "stock" in both else both[0]
    stalled = _stalls(under[variant])
    verdicts = column_row(under[variant], columns)
    passing = [column for column, v in zip(columns, verdicts, strict=True) if v == "Pass"]
    where = "every column" if len(passing) == len(columns) else _listed(passing)
    below = [c for c in stalled if _below_startable(c)]
    lie = "all lie" if len(below) == len(stalled) else f"lie, in {plural(len(below), 'cell')},"
    rest = len(stalled) - len(below)
    others = f"; the other {rest} reach `startable` or have none" if rest else ""
    others_below = {
        v: all(_below_startable(c) for c in _stalls(under[v])) for v in both if v != variant
    }
    alike = [f"`{v}`" for v, below in others_below.items() if below]
    unlike = [f"`{v}`" for v, below in others_below.items() if not below]
    likewise = f" Likewise under {_listed(alike)}." if alike else ""
    if unlike:
        likewise += f" Under {_listed(unlike)} some of these stalls reach `startable`."
    count = len({c.model for c in stalled})
    models = f"{plural(count, 'model')} read{'s' if count == 1 else ''}"
    cases = plural(len({c.case for c in cells if c.column}), "case")
    stalls = f"{plural(len(stalled), 'cell')}, such as `{(below or stalled)[0].case}`"
    return (
        f"**Summary and Models.** Under `{variant}` the Summary reads Pass in {where}, while "
        f"{models} `unpromotable` in the Models table: their stalls ({stalls}) {lie} below "
        "`startable`, the smallest pool vLLM's start-up sizing gives an engine serving their "
        f"requests, so no engine starts with such a pool{others}. The Summary's columns hold "
        f"the table cases only ({cases} with a `column`).{likewise}"
    )


def reading_guide(cells: Sequence[CellResult]) -> list[str]:
    """How to read the report's tables, a short paragraph each (the words the tables use),
    the Summary and the Models table reconciled first where they seem to disagree."""
    guide = [
        "**Severities**, worst first: `DEADLOCK` (an engine with that pool hangs for good), "
        "`LEAK`, `ERROR`, `TIMEOUT`, `sizer` (vLLM starts an engine with that pool, yet a "
        "request it accepted never finishes), `unpromotable` (a stall below the fit: a load "
        "admitted that can never be promoted), `over-reserves` (a request that fits refused; "
        "`2+ blocks`: even the largest pool swept refused it), `expectation` (a step's "
        "`expect` unmet); `ok`: no pool an engine can have failed.",
        "**Tightness**: the smallest pool from which every swept size finishes, minus the fit "
        "(`0` is tight; `stall`: under-reservation; `unfinished`: the largest pool swept did "
        "not finish). A negative number: that many pools below the fit finish too (the fit is "
        "each request alone in an ample pool; the run needed less).",
    ]
    reconciled = summary_and_models(cells)
    return [reconciled, *guide] if reconciled else guide
