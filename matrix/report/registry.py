"""The Registry tables (docs/sweep.md): for a run holding class cells (the case files of
``matrix/sweep/cells``, named ``class_<class>``), each layout class with how many architectures
each release's committed baseline gives it and which, and each variant's worst severity over
the class's cells; then every architecture of the baselines by name, with its class or reason
on each release. The architectures come from the committed baselines (``matrix.case.baselines``),
the severities from the cells' records alone, so a report rewritten from its JSON is the same.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from matrix.case.baselines import Row, committed
from matrix.case.layout_class import class_slug
from matrix.judge.result import CellResult
from matrix.judge.severity import SEVERITY_ORDER
from matrix.report.tables import Table, variants_of
from matrix.variant_names import table_label

CLASS_CASE = "class_"  # the prefix of a class case's name (matrix.case.class_cases)


def class_of(cell: CellResult) -> str | None:
    """The class slug a class cell runs, or None for any other cell."""
    name = cell.case.split("[", 1)[0]
    return name.removeprefix(CLASS_CASE) if name.startswith(CLASS_CASE) else None


def _members(baselines: Mapping[str, Sequence[Row]]) -> dict[str, dict[str, list[str]]]:
    """Each class slug -> each release -> its architectures there."""
    found: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for version, rows in baselines.items():
        for row in rows:
            if row.status == "layout":
                found[class_slug(row.detail)][version].append(row.architecture)
    return found


def _worst(cells: Sequence[CellResult]) -> str:
    """The worst severity of some cells in a word (``ok`` for none), ``!`` where one differs
    from its expectation."""
    found = {cell.severity for cell in cells if cell.severity}
    worst = next((s for s in SEVERITY_ORDER if s in found), None)
    text = "skip" if cells and all(c.observed == "skip" for c in cells) else worst or "ok"
    return text + ("!" if any(not c.as_expected for c in cells) else "")


def registry_table(
    cells: Sequence[CellResult], baselines: Mapping[str, Sequence[Row]] | None = None
) -> Table:
    """A row per class the cells run: its architectures per release (a count each, then the
    names, the newest release's first), and each variant's worst severity."""
    baselines = committed() if baselines is None else baselines
    members = _members(baselines)
    by_class: dict[str, list[CellResult]] = defaultdict(list)
    for cell in cells:
        slug = class_of(cell)
        if slug is not None:
            by_class[slug].append(cell)
    variants = variants_of([c for group in by_class.values() for c in group])
    versions = list(baselines)
    header = ["class", *versions, "architectures", *(table_label(v) for v in variants)]
    rows = []
    ordered = sorted(by_class, key=lambda s: (-sum(map(len, members[s].values())), s))
    for slug in ordered:
        per_release = members[slug]
        names: list[str] = []
        for version in reversed(versions):
            names += [n for n in per_release.get(version, []) if n not in names]
        counts = [str(len(per_release.get(v, []))) or "-" for v in versions]
        verdicts = [_worst([c for c in by_class[slug] if c.variant == v]) for v in variants]
        rows.append([slug, *counts, ", ".join(names) or "-", *verdicts])
    return header, rows


def architecture_table(baselines: Mapping[str, Sequence[Row]] | None = None) -> Table:
    """Every architecture of the committed baselines, by name: its class (slug) or outcome
    and reason on each release (``-`` where the release's registry lacks it)."""
    baselines = committed() if baselines is None else baselines
    by_release = {v: {row.architecture: row for row in rows} for v, rows in baselines.items()}
    names = sorted({name for rows in by_release.values() for name in rows})

    def cell(row: Row | None) -> str:
        if row is None:
            return "-"
        return class_slug(row.detail) if row.status == "layout" else f"{row.status}: {row.detail}"

    rows = [[name, *(cell(by_release[v].get(name)) for v in baselines)] for name in names]
    return ["architecture", *baselines], rows
