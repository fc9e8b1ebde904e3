"""What ``python -m matrix record-expectations`` writes into one case file: each cell of a
run's report that ran and does not meet the file's expectation now gets one, ``pass`` or the
failure kind it observed (``stall``). A variant whose cells want one value at every point of
the case is set in the top-level ``expect:``; otherwise ``when:`` entries name the points, an
axis with its label (or labels) where a block of points shares the value. Stock follows the
variant its release ships unless its own value differs. The edits are made in the text
(``matrix.case.expectation_edits``: comments, order and style kept); then the file is loaded
again and every cell checked: the recorded ones meet their verdicts, every other expectation
is as it was, or the file is not planned (an :class:`EditError` says why).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from matrix.case.expansion import Case, Cell, cells_for_case, expand_document
from matrix.case.expectation_edits import EditError, apply, expect_edits, when_edits
from matrix.case.loading import CaseFileError, read_document, validate
from matrix.case.when import RELEASE_AXIS
from matrix.installed import installed_release
from matrix.judge.result import CellResult
from matrix.outcomes import FailureKind
from matrix.variant_names import BuiltInVariant

Point = tuple[str, ...]  # a case's axis labels, in the matrix's order
LISTED = 5  # recorded cells named per file


def observed_value(cell: CellResult) -> str:
    """What a cell observed, as an expectation: ``pass``, else its failure kind."""
    if cell.observed == "pass":
        return "pass"
    return cell.kind if cell.kind in get_args(FailureKind) else "fail"


def meets(expected: str, cell: CellResult) -> bool:
    """Whether ``cell``'s verdict meets ``expected`` (as ``judge.verdict.expectation_met``)."""
    if expected in ("pass", "fail"):
        return cell.observed == expected
    return cell.observed == "fail" and cell.kind == expected


def rectangles(points: set[Point], labels: Sequence[Sequence[str]]) -> list[list[set[str]]]:
    """``points`` as blocks, each a label set per axis whose product is in ``points``."""
    if not labels:
        return [[]]
    projection = [{point[i] for point in points} for i in range(len(labels))]
    if len(points) == len(list(itertools.product(*projection))):
        return [projection]
    heads: dict[frozenset[Point], set[str]] = {}
    for label in labels[0]:
        tails = frozenset(point[1:] for point in points if point[0] == label)
        if tails:
            heads.setdefault(tails, set()).add(label)
    return [
        [head, *block]
        for tails, head in heads.items()
        for block in rectangles(set(tails), labels[1:])
    ]


@dataclass(frozen=True)
class Plan:
    """A file's new text and the cells whose expectations it records."""

    path: Path
    text: str
    recorded: tuple[tuple[str, str], ...]  # (test id, value)


@dataclass
class _File:
    """A case file's cases with their axis labels, and its cells' report results."""

    path: Path
    names: list[str]  # the axes
    labels: list[list[str]]  # each axis's labels
    cases: list[tuple[Point, Case]]


def _read(path: Path, variants: tuple[str, ...]) -> _File:
    document = read_document(path)
    base = validate(document, variants=variants)
    axes = list((base.matrix or {}).items())
    labels = [axis.labels() for _, axis in axes]
    points = list(itertools.product(*labels))
    return _File(
        path,
        [name for name, _ in axes],
        labels,
        list(zip(points, expand_document(document, variants), strict=True)),
    )


def _cells(
    known: _File, ships: BuiltInVariant, variants: tuple[str, ...]
) -> list[tuple[Point, Cell]]:
    return [
        (point, cell)
        for point, case in known.cases
        for cell in cells_for_case(case, ships, variants)
    ]


def _wanted(
    cells: list[tuple[Point, Cell]], report: dict[str, CellResult], notes: list[str]
) -> tuple[dict[tuple[str, str], set[Point]], list[tuple[str, str]]]:
    """Each (variant, value) to write -> the points that want it (stock's only where what its
    release ships will not give it), and every cell whose verdict is recorded, with it."""
    wanted: dict[tuple[str, str], set[Point]] = {}
    recorded: list[tuple[str, str]] = []
    stock: list[tuple[Point, Cell, str]] = []
    for point, cell in cells:
        result = report.get(cell.test_id)
        if result is None or result.observed == "skip" or meets(cell.expected, result):
            continue
        if result.case_digest and result.case_digest != cell.case.digest:
            notes.append(f"{cell.test_id}: its case changed since the run: run it again")
            continue
        value = observed_value(result)
        recorded.append((cell.test_id, value))
        if cell.variant == "stock" and cell.judged_as != "stock":
            stock.append((point, cell, value))
        else:
            wanted.setdefault((cell.variant, value), set()).add(point)
    for point, cell, value in stock:
        if point not in wanted.get((cell.judged_as, value), set()):
            wanted.setdefault(("stock", value), set()).add(point)
    return wanted, recorded


def _edited(text: str, known: _File, wanted: dict[tuple[str, str], set[Point]], top: bool) -> str:
    """The text with ``wanted`` written: in the top-level ``expect:`` where a value holds at
    every point (``top``), else as ``when:`` entries."""
    document = read_document(known.path)
    lines = text.splitlines(keepends=True)
    values: dict[str, str] = {}
    entries: dict[tuple[frozenset[str], ...], dict[str, str]] = {}
    for (variant, value), points in wanted.items():
        if top and len(points) == len(known.cases):
            values[variant] = value
            continue
        if not known.names:
            raise EditError("a case without axes takes its expectations in expect: only")
        for block in rectangles(points, known.labels):
            key = tuple(frozenset(labels) for labels in block)
            entries.setdefault(key, {})[variant] = value
    edits = expect_edits(document, lines, values) if values else []
    written = []
    for key, expect in entries.items():
        conditions = {
            name: [label for label in every if label in chosen]
            for name, every, chosen in zip(known.names, known.labels, key, strict=True)
            if len(chosen) < len(every)
        } or {known.names[0]: list(known.labels[0])}  # every point, named by its first axis
        written.append((conditions, expect))
    edits += when_edits(document, lines, written) if written else []
    return apply(text, edits)


def plan_file(
    path: Path,
    report: dict[str, CellResult],
    ships: BuiltInVariant,
    variants: tuple[str, ...],
    notes: list[str],
    found: set[str],
    release: str,
) -> Plan | None:
    """The file with the report's verdicts recorded (None: nothing to record; ``found`` gets
    its cells' ids, ``notes`` what is passed over); raises :class:`EditError` or
    :class:`CaseFileError` where it cannot be done."""
    known = _read(path, variants)
    cells = _cells(known, ships, variants)
    found.update(cell.test_id for _, cell in cells)
    if release != installed_release() and _names_releases(path):
        raise EditError(
            f"its when: names releases, and the report is of {release}: record it where "
            f"vLLM {release} is installed (here, {installed_release()})"
        )
    wanted, recorded = _wanted(cells, report, notes)
    if not wanted:
        return None
    text = path.read_text(encoding="utf-8")
    problem = ""
    for top in (True, False):  # the top-level expect: where it can be, else when: entries
        try:
            edited = _edited(text, known, wanted, top)
            _check(path, edited, cells, report, ships, variants)
        except (EditError, CaseFileError) as error:
            problem = problem or str(error)  # the top-level route's, where both fail
            continue
        return Plan(path, edited, tuple(recorded))
    raise EditError(problem)


def _names_releases(path: Path) -> bool:
    """Whether a ``when:`` entry of the file names releases (then its expectations are the
    installed release's: ``installed.installed_release``)."""
    when = read_document(path).data.get("when")
    return any(isinstance(e, dict) and RELEASE_AXIS in e for e in when or [])


def _check(
    path: Path,
    edited: str,
    cells: list[tuple[Point, Cell]],
    report: dict[str, CellResult],
    ships: BuiltInVariant,
    variants: tuple[str, ...],
) -> None:
    """The edited text loaded beside the file (where a case's model is found): every cell the
    report ran meets its verdict, and every other expectation is as it was (but a stock cell
    that did not run, which follows what its release ships); :class:`EditError` otherwise."""
    trial = path.with_name(f".{path.name}.recording")
    try:
        trial.write_text(edited, encoding="utf-8")
        now = {cell.test_id: cell for _, cell in _cells(_read(trial, variants), ships, variants)}
    finally:
        trial.unlink(missing_ok=True)
    for _, cell in cells:
        after = now.get(cell.test_id)
        if after is None:
            raise EditError(f"{cell.test_id}: gone from the edited file")
        result = report.get(cell.test_id)
        if result is not None and result.observed != "skip":
            if not meets(after.expected, result):
                raise EditError(f"{cell.test_id}: the edit does not give it its verdict")
        elif after.expected != cell.expected and cell.judged_as == cell.variant:
            raise EditError(f"{cell.test_id}: the edit changes the expectation of a cell not run")
