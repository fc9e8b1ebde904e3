"""The fidelity checks: each release's variant, patched into every release (and into a dev
build), must behave exactly like the stock of the release that shipped it; a check compares
the two reports' cells case by case.

Pure: works on loaded reports (matrix/report/crossversion.py loads them), returns frozen records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from matrix.judge.result import CellResult
from matrix.releases import RELEASES, nearest_release
from matrix.report.release_reports import DEV, ReleaseReport


@dataclass(frozen=True)
class FidelityCheck:
    """One check: ``variant`` patched into ``patched_into`` must behave as stock ``stock_of``."""

    variant: str
    patched_into: str
    stock_of: str

    def __str__(self) -> str:
        if self.variant == "stock":
            return f"stock {self.patched_into} against stock {self.stock_of}"
        return f"{self.variant} patched into {self.patched_into} == stock {self.stock_of}"

    @property
    def across_releases(self) -> bool:
        """Whether the check compares two releases of one admission, not one with itself or a
        dev build's stock."""
        return self.patched_into != self.stock_of and not self.informational

    @property
    def informational(self) -> bool:
        """A dev build's stock against the release it is driven as (what the build changed),
        or a check across two releases whose admission code differs around the reservation
        (0.34's queues against 0.30-0.33's loop): shown case by case, never a failure, since
        a difference there can be the release's, not the variant's."""
        return self.variant == "stock" or self.across_admissions

    @property
    def across_admissions(self) -> bool:
        """Whether the two releases admit waiting requests by different code."""
        shapes = {
            RELEASES[r].admission for r in (self.patched_into, self.stock_of) if r in RELEASES
        }
        return len(shapes) > 1


# The variant each release ships, patched into every release, against that release's stock:
# "original" patched into 0.33 must equal stock 0.31, "fixed" patched into 0.31 stock 0.32,
# "none" patched into 0.33 stock 0.30, and so on for every pair. A release against itself
# tells a wrong variant from a wrong adapter.
FIDELITY_CHECKS = tuple(
    FidelityCheck(shipped.ships, patched_into=other, stock_of=release)
    for release, shipped in RELEASES.items()
    for other in RELEASES
)


def dev_checks(reports: dict[str, ReleaseReport]) -> tuple[FidelityCheck, ...]:
    """With a dev report: its stock against the release it is driven as (informational), and
    each release's variant patched into the dev build against that release's stock (the
    adapter drives the dev build faithfully)."""
    dev = reports.get(DEV)
    if dev is None:
        return ()
    informational = FidelityCheck("stock", patched_into=DEV, stock_of=nearest_release(dev.version))
    patched = (
        FidelityCheck(shipped.ships, patched_into=DEV, stock_of=release)
        for release, shipped in RELEASES.items()
    )
    return (informational, *patched)


# What must be equal: the verdict, the failing pool sizes, the fit, and the diagnosis (which
# names the free and reserved blocks at the failure).
COMPARED_FIELDS = ("observed", "kind", "failing_pools", "fit", "detail")


@dataclass(frozen=True)
class FidelityResult:
    """How a check went: equal, differs or not run, with the differences or the reason."""

    check: FidelityCheck
    status: Literal["equal", "differs", "not_run"]
    compared: int  # cases compared
    differences: tuple[str, ...] = ()
    reason: str = ""  # why it did not run
    # Cases not compared: their case files, or the layouts derived for them, differ.
    changed: tuple[str, ...] = ()
    # Nor those swept over other pools: the smallest pool that admits anything (what the
    # connector's lookup loads) or the fit differs on the two releases, a change outside the
    # variant (both are measured under the release's own stock).
    resized: tuple[str, ...] = ()


def _shown(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def _difference(
    case: str, patched: CellResult, stock: CellResult, compared: tuple[str, ...]
) -> str | None:
    fields = [f for f in compared if getattr(patched, f) != getattr(stock, f)]
    if not fields:
        return None
    shown = "; ".join(
        f"{f}: patched {_shown(getattr(patched, f))!r} vs stock {_shown(getattr(stock, f))!r}"
        for f in fields
    )
    return f"{case}: {shown}"


def check_fidelity(
    check: FidelityCheck,
    reports: dict[str, ReleaseReport],
    compared: tuple[str, ...] = COMPARED_FIELDS,
) -> FidelityResult:
    """Compares the cases both reports ran (a case file may leave a variant out), field by
    field (``compared``), when the same matrix code wrote both."""
    absent = [r for r in dict.fromkeys((check.patched_into, check.stock_of)) if r not in reports]
    if absent:
        return FidelityResult(check, "not_run", 0, reason=f"no report for {', '.join(absent)}")
    patched_report, stock_report = reports[check.patched_into], reports[check.stock_of]
    if patched_report.matrix_digest != stock_report.matrix_digest:
        reason = "the reports were written by different matrix code: rerun both envs"
        return FidelityResult(check, "not_run", 0, reason=reason)
    patched = patched_report.cells_of(check.variant)
    stock = stock_report.cells_of("stock")
    ran = sorted(
        case
        for case in patched.keys() & stock.keys()
        if "skip" not in (patched[case].observed, stock[case].observed)
    )
    changed = tuple(c for c in ran if patched[c].case_digest != stock[c].case_digest)
    resized = tuple(
        c
        for c in ran
        if c not in changed and check.variant != "stock" and patched[c].swept != stock[c].swept
    )
    both = [c for c in ran if c not in changed and c not in resized]
    if not both:
        return FidelityResult(check, "not_run", 0, reason="no case ran in both reports")
    found = [_difference(case, patched[case], stock[case], compared) for case in both]
    differences = tuple(d for d in found if d)
    status: Literal["equal", "differs"] = "differs" if differences else "equal"
    return FidelityResult(check, status, len(both), differences, changed=changed, resized=resized)
