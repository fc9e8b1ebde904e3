"""What a report says before its tables: how many cells ran and how they ended, the findings
(cells against their case's expectation, the severe failures, what was skipped whole), and
how to read the tables (words the tables use). Pure: from the cells alone."""

from __future__ import annotations

from collections.abc import Sequence

from matrix.judge.result import CellResult, wholly_skipped
from matrix.outcomes import SEVERE
from matrix.report.tables import mismatches, variants_of
from matrix.variant_names import TABLE_LABELS
from matrix.wording import plural

LISTED = 5  # cells named per finding; the rest are counted


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
        "skipped": sum(1 for c in cells if c.observed == "skip"),
    }
    outcome = ", ".join(f"{n} {name}" for name, n in ran.items() if n)
    wrong = mismatches(cells)
    verdict = (
        f"{plural(len(wrong), 'cell')} against {'its' if len(wrong) == 1 else 'their'} "
        "case's expectation (marked !)"
        if wrong
        else "every cell as its case expects"
    )
    shape = f"{plural(len(cases), 'case')} x {plural(len(variants_of(cells)), 'variant')}"
    return f"{plural(len(cells), 'cell')} ({shape}): {outcome}; {verdict}."


def findings(cells: Sequence[CellResult]) -> list[str]:
    """The findings, a line each: cells against their expectation, the severe failures (even
    where expected), and cases or models whose every cell was skipped."""
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
    return found


def reading_guide(cells: Sequence[CellResult]) -> list[str]:
    """How to read the report's tables, a paragraph each (the words the tables use)."""
    labels = ", ".join(f"{label} is `{name}`" for name, label in TABLE_LABELS.items())
    table_cases = len({c.case for c in cells if c.column})
    model_cases = len({c.case for c in cells if c.model})
    guide = [
        f"**Variant names.** Every table names variants as the case files and test ids do; the "
        f"Summary's rows keep the upstream PR's names ({labels}).",
        f"**Summary and Models cover different cases.** The Summary is the upstream PR's table: "
        f"its columns hold only the table cases ({plural(table_cases, 'case')} with a "
        f"`column`). The Models table covers the real models' cases "
        f"({plural(model_cases, 'case')}), which also sweep pools below the fit. So a column "
        "can read Pass for a variant while some model reads `unpromotable` under it: a stall "
        "below that model's fit, in a case (such as a prompt one token past a Mamba block "
        "boundary, `-past`) that the table cases do not have.",
        "**Severities**, worst first: `DEADLOCK` (an engine with that pool hangs for good), "
        "`LEAK`, `ERROR`, `TIMEOUT`, `sizer` (vLLM starts an engine with that pool, yet a "
        "request it accepted never finishes), `unpromotable` (a stall below the fit: a load "
        "admitted that can never be promoted), `over-reserves` (a request that fits refused), "
        "`expectation` (a step's `expect` unmet); `ok`: no pool an engine can have failed.",
        "**Over-reservation** is in blocks; `2+ blocks` means at least 2: even the largest pool "
        "swept refused the request (sweep higher, `pool: {above: N}`, to see how many).",
        "**Tightness** is the smallest pool from which every swept size finishes, minus the "
        "fit: `0` is tight, a positive number the blocks reserved beyond need, `stall` "
        "under-reservation, `unfinished` the largest pool swept did not finish. A negative "
        "number (`-3`, `-10`) means that many pools below the fit finish too: the fit is "
        "measured with each request alone in an ample pool, and the run needed less than that "
        "(a request aborted before its peak, for example).",
    ]
    if not (table_cases and model_cases):
        guide.pop(1)
    return guide
