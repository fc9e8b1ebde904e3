"""Which pictures a report has and what they are named (``planned``), the colours they share,
and whether they can be drawn at all (matplotlib, an optional extra: ``pip install
vllm-kv-matrix[pictures]``; without it the reports say that pictures are off). Pure: the
drawing is ``matrix.report.pictures``, and only it imports matplotlib.

- ``severity.svg``: a heat map of each model (its cases) and each other case file by variant,
  a square the worst severity of those cells under that variant, with how many cells have it;
  the full gallery adds ``severity-cases.svg``, a row per case (the HTML page's Cases x
  variants table is coloured alike);
- ``pools-<model>.svg``: a pool strip per model, a panel per variant side by side, the outcome
  at each pool swept per case, the fit and ``startable`` marked;
- ``cells/<case>-<variants>.svg``: a failing cell at its first failing pool and at its fit,
  step by step: each KV cache group's blocks stacked per request, the free blocks, the pool
  line, and the events (a load admitted or completed, a preemption, where progress stops).
  Variants whose runs of a case were the same, step for step, share one picture
  (``case-stock+fixed.svg``): on a release, the variant it ships runs exactly as stock.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from matrix.case.limits import MAX_PICTURES
from matrix.judge.result import CellResult
from matrix.outcomes import SEVERE, UNSUPPORTED
from matrix.report.tables import sort_cells

INSTALL_HINT = "pip install vllm-kv-matrix[pictures]"
# A cell's colour: its worst severity, else how it ended (worst first, as the legends list).
SHADES: dict[str, str] = {
    "deadlock": "#67001f",
    "leak": "#40004b",
    "protocol": "#542788",
    "error": "#762a83",
    "timeout": "#9970ab",
    "sizer": "#b2182b",
    "unpromotable": "#f46d43",
    "over_reservation": "#fdae61",
    "decision": "#fec44f",
    "expectation": "#fee08b",
    "fail": "#d6604d",  # failed with no severity of its own
    "undersized": "#d9d9d9",  # a pool no engine serving the requests has
    "pass, tolerated": "#d9ef8b",  # passed, refusing within the case's fit_slack
    "pass": "#a6d96a",
    "finished": "#a6d96a",
    UNSUPPORTED: "#f0f0f0",
}


# ``MATRIX_PICTURES=off`` turns pictures off where matplotlib is installed (CI's full runs,
# whose pictures no one looks at; the pictures' own tests draw theirs); ``all`` draws the full
# gallery: every failing cell, and the heat map of every case.
SWITCH = "MATRIX_PICTURES"
OFF, GALLERY = ("off", "0", "no"), "all"


def installed() -> bool:
    """Whether matplotlib is installed."""
    return importlib.util.find_spec("matplotlib") is not None


def available() -> bool:
    """Whether pictures are drawn: matplotlib is installed and they are not switched off."""
    return installed() and os.environ.get(SWITCH, "").lower() not in OFF


def full_gallery() -> bool:
    """Whether every failing cell is pictured (``MATRIX_PICTURES=all``), not only those a
    reader looks at (:class:`PictureChoice`)."""
    return os.environ.get(SWITCH, "").lower() == GALLERY


class PictureChoice:
    """Which failing cells a run pictures, decided as each cell ends (a pictured cell's
    first failing pool and fit are run again, block by block): by default what a reader looks
    at, the cells against their case's expectation, the findings' cells (a severe failure),
    and the first cell of each case file with each kind and severity of failure; with the
    full gallery every failing cell; none when pictures are off. A run holds each case file
    in one process (whole files a worker, ``matrix.case.split``), in the file's order, so the
    choice is the same however the run is split."""

    def __init__(self, drawn: bool, everything: bool) -> None:
        self.drawn = drawn
        self.everything = everything
        self._seen: set[tuple[str, str, str | None]] = set()

    def wants(self, cell: CellResult, file: str) -> bool:
        """Whether ``cell`` (of case file ``file``) is pictured; the first of its kind counts."""
        if not self.drawn or cell.observed != "fail":
            return False
        if self.everything or not cell.as_expected or cell.severity in SEVERE:
            return True
        kind = (file, cell.kind, cell.severity)
        if kind in self._seen:
            return False
        self._seen.add(kind)
        return True


def off_reason() -> str:
    """Why a report has no pictures."""
    if not installed():
        return f"matplotlib is not installed (`{INSTALL_HINT}`)"
    return f"{SWITCH}=off"


@dataclass(frozen=True)
class Picture:
    """One picture: its file name in the report's pictures folder, what it shows, and the
    model or cell it is of (none for the heat maps; ``per_case``: the map of every case, not
    of each model and case file)."""

    name: str
    title: str
    model: str = ""
    cell: CellResult | None = None
    per_case: bool = False
    # A cell picture's cells: its variants' cells of one case whose runs were the same.
    alike: tuple[CellResult, ...] = ()


# A picture's name, well under the 255 bytes a file name may have (a case with many axes under
# every variant, a model's name from anyone's shard).
MAX_SLUG = 160


def _slug(text: str) -> str:
    """A file name from a cell id or a model name: ``case[k=1]-fixed`` -> ``case_k=1-fixed``;
    a long one cut, ending in its whole text's digest (stable, and two never share one)."""
    slug = re.sub(r"[^A-Za-z0-9._=,+-]+", "_", text.replace("]", "")).strip("_")
    if len(slug) <= MAX_SLUG:
        return slug
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return f"{slug[: MAX_SLUG - len(digest) - 1]}_{digest}"


HEAT_MAP = Picture("severity.svg", "Worst severity per model and case file")
CASE_MAP = Picture("severity-cases.svg", "Cases x variants, by severity", per_case=True)


def planned(cells: Sequence[CellResult], every_case: bool | None = None) -> list[Picture]:
    """The pictures the cells give, named from the cell ids and model names (stable; a name
    two ids would share takes the next free suffix, in the cells' order), the maps and the
    models' strips first, at most ``MAX_PICTURES``; ``every_case``: the map of every case too
    (None: with the full gallery, :func:`full_gallery`)."""
    return _every_picture(cells, every_case)[:MAX_PICTURES]


def left_out(cells: Sequence[CellResult]) -> int:
    """How many of the cells' pictures :func:`planned` leaves out (over ``MAX_PICTURES``)."""
    return max(0, len(_every_picture(cells, None)) - MAX_PICTURES)


def _every_picture(cells: Sequence[CellResult], every_case: bool | None) -> list[Picture]:
    found = [HEAT_MAP] if cells else []
    if cells and (full_gallery() if every_case is None else every_case):
        found.append(CASE_MAP)
    for model in sorted({c.model for c in cells if c.model}):
        found.append(Picture(f"pools-{_slug(model)}.svg", f"{model}: each pool", model=model))
    alike: dict[tuple[object, ...], list[CellResult]] = {}
    for cell in sort_cells(cells):
        if cell.steps:
            same = (cell.case, cell.steps, cell.kind, cell.severity, cell.failures, cell.fit)
            alike.setdefault(same, []).append(cell)
    taken: set[str] = set()
    for group in alike.values():
        first, variants = group[0], "+".join(c.variant for c in group)
        slug = base = _slug(f"{first.case}-{variants}")
        suffix = 1
        while slug in taken:
            suffix += 1
            slug = f"{base}_{suffix}"
        taken.add(slug)
        title = f"{first.case}-{variants}"
        found.append(Picture(f"cells/{slug}.svg", title, cell=first, alike=tuple(group)))
    return found


def shade(cell: CellResult) -> str:
    """A cell's colour name in the heat map (a key of :data:`SHADES`)."""
    if cell.observed == "skip":
        return UNSUPPORTED
    if cell.observed == "pass":
        return "pass, tolerated" if cell.severity else "pass"
    return cell.severity or "fail"


def cells_of(picture: Picture, cells: Sequence[CellResult]) -> list[CellResult]:
    """The cells a picture is drawn from."""
    if picture.cell is not None:
        return list(picture.alike or (picture.cell,))
    return [c for c in cells if c.model == picture.model] if picture.model else list(cells)
