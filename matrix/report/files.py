"""Report files: cells become Markdown (with its pictures in a folder beside it), a
self-contained HTML page and JSON, built from the report's sections, with what the run was
(:class:`RunInfo`); and the terminal's lines, fitted to its width. Everything written comes
from the cells and the run's info, so a report merged from shards is the same."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from matrix.case.split import place_digest
from matrix.judge.result import CellResult, failing_skips, wholly_skipped
from matrix.outcomes import UNSUPPORTED
from matrix.report.drawing import draw_all
from matrix.report.fitting import fit_prose, fit_table, fits, terminal_width
from matrix.report.gallery import Picture, available, planned
from matrix.report.headline import counts_line, findings
from matrix.report.html import html_page
from matrix.report.info import RunInfo, matrix_digest, run_info
from matrix.report.markdown import markdown_report
from matrix.report.sections import Section, sections
from matrix.report.tables import case_table, render_text, sort_cells, tightness_table
from matrix.wording import plural

__all__ = ["RunInfo", "markdown_report", "matrix_digest", "run_info"]

REPORT_SUFFIXES = (".md", ".json", ".html")
REPORT_SUFFIX_HINT = "use a .md, .json or .html file name"
SHARD_FIELD = "shard"  # a shard report's record of its part of the run (report/merge.py)
FULL_TERMINAL = "--matrix-full-terminal"  # every section in the terminal, as a run without files
TERMINAL_ROWS = 40  # the terminal's rows of cases against their expectation; the rest in files
EMPTY_RUN = "matrix: no cell of this selection here: an empty run, nothing to report"


def empty_shard_line(group: int, splits: int) -> str:
    """What a CI shard whose files hold no cell of the selection says (it passes: another
    shard has the cells, or the merge of them all fails)."""
    return (
        f"matrix: shard {group} of {splits} holds no cell of this selection: an empty shard, "
        "its report selecting none (the merge fails when every shard is empty)"
    )


@dataclass(frozen=True)
class Shard:
    """Which part of a run a report holds: group ``group`` of ``splits``, whose files gave the
    cells ``selected`` (their ids, ``case-variant``), of the run whose whole selection (every
    file it collects, the code, ``-k``, ``-m``, the variants) has the digest ``selection``."""

    group: int
    splits: int
    selected: tuple[str, ...]
    selection: str
    suite: str = ""  # the case folder's suite (matrix.case.shipped.SUITES): its reports' prefix

    def to_dict(self) -> dict[str, Any]:
        """The report's ``shard`` field, its place sealed (``place``: split.place_digest)."""
        return {
            "group": self.group,
            "splits": self.splits,
            "selected": list(self.selected),
            "selection": self.selection,
            "suite": self.suite,
            "place": place_digest(self.selection, self.group, self.splits, self.selected),
        }


def terminal_lines(
    cells: Sequence[CellResult],
    info: RunInfo,
    width: int | None = None,
    written: Sequence[Path] = (),
) -> list[str]:
    """The results as the terminal summary shows them, no line wider than ``width`` (the
    terminal's, 120 without one): the headline's sections, the cases whose cells differ from
    their expectation, the counts and the findings, then a line naming what is left out and
    the files ``written`` (a Markdown or HTML report) that hold it. With none written, every
    section, as nothing else holds them. A section is shown in its brief form (with notes on
    what that leaves out) where it asks for it or the full table is too wide."""
    width = width or terminal_width()
    cells = sort_cells(cells)  # a merge's come shard by shard: the examples named stay the same
    lines = fit_prose(f"vLLM from the {info.source.describe()}", width) if info.source else []
    every = sections(cells)
    shown = [s for s in every if s.headline or not written]
    for section in shown:
        lines += ["", section.title, *_section_lines(section, width)]
    wrong = {cell.case for cell in cells if not cell.as_expected}
    if written and wrong:
        differing = case_table([c for c in cells if c.case in wrong], brief=True)
        header, rows = differing
        title = f"Cases with a cell against its expectation ({len(rows)})"
        lines += ["", title, *fit_table((header, rows[:TERMINAL_ROWS]), width)]
        if len(rows) > TERMINAL_ROWS:
            lines += fit_prose(f"and {len(rows) - TERMINAL_ROWS} more in the reports", width)
    lines += ["", *fit_prose(counts_line(cells), width)]
    for finding in findings(cells):
        lines += fit_prose(f"- {finding.replace('`', '')}", width)
    if all(cell.observed == "skip" for cell in cells):
        lines += [
            "",
            *fit_prose(f"every cell is {UNSUPPORTED}, so the run fails: {cells[0].detail}", width),
        ]
    left = [s.title for s in every if not (s.headline or not written)]
    if left:
        files = " and ".join(str(path) for path in written)
        lines += [
            "",
            *fit_prose(
                f"In full in {files}: {', '.join(left)}; {FULL_TERMINAL} (merge: "
                "--full-terminal) prints them here.",
                width,
            ),
        ]
    return lines


def _section_lines(section: Section, width: int) -> list[str]:
    """A section's table fitted to ``width``: in full, or in brief with its notes."""
    full = render_text(section.table).splitlines()
    if section.brief is None or (not section.always_brief and fits(full, width)):
        return fit_table(section.table, width)
    notes = [line for note in section.notes for line in fit_prose(note, width, indent="  ")]
    return [*fit_table(section.brief, width), *notes]


def shown_in(paths: Sequence[Path], full: bool) -> list[Path]:
    """The report files that hold what the terminal leaves out (none when it is to show
    everything): the Markdown and the HTML page among ``paths``."""
    return [] if full else [path for path in paths if path.suffix in (".md", ".html")]


def summary_lines(
    cells: Sequence[CellResult], info: RunInfo, written: Sequence[Path] = ()
) -> list[str]:
    """The end of a run in the terminal (:func:`terminal_lines`), then a line for each case or
    model whose every cell was skipped: failing where such a run tested nothing of it; not a
    failure, and saying why, where the case asks for what the release lacks or a filter chose
    the cells (``failing_skips``)."""
    width = terminal_width()
    failing = failing_skips(list(cells), bool(info.selection))
    why_not = "a filtered run" if info.selection else "what the release lacks"
    said = [
        f"matrix: FAILED: {line}"
        if line in failing
        else f"matrix: {line} ({why_not}: not a failure)"
        for line in wholly_skipped(list(cells))
    ]
    lines = terminal_lines(cells, info, width, written)
    return [*lines, *(w for f in said for w in fit_prose(f, width))]


def filtered_note(cells: Sequence[CellResult], info: RunInfo) -> str | None:
    """The line a filtered run ends with: its reports hold its cells only."""
    if not info.selection:
        return None
    count = plural(len(cells), "cell")
    return (
        f"matrix: a filtered run ({info.selection}): its reports hold its {count} only; "
        f"`{info.command}` without the filter writes the whole suite's"
    )


def print_summary(cells: Sequence[CellResult], info: RunInfo, written: Sequence[Path] = ()) -> bool:
    """Prints the run's title and :func:`summary_lines` (a forked run's, a merge's); True when
    a case or model had every cell skipped in a way that fails the run (``failing_skips``)."""
    title = f" {info.title()} "
    print(f"\n{title:=^80}")
    print("\n".join(summary_lines(cells, info, written)))
    return bool(failing_skips(list(cells), bool(info.selection)))


def json_report(
    cells: Sequence[CellResult], info: RunInfo, shard: Shard | None = None
) -> dict[str, Any]:
    """The results as JSON-ready data: what ran, every cell, and the tightness table; a
    shard's report also says which part of the run it holds."""
    header, rows = tightness_table(cells)
    tightness = {row[0]: dict(zip(header[1:], row[1:], strict=True)) for row in rows}
    info_fields = asdict(info)
    # Release reports keep the shape they had before dev builds, suites and selections.
    for name, unset in (("source", None), ("suite", ""), ("selection", "")):
        if info_fields[name] == unset:
            del info_fields[name]
    report = {
        **info_fields,
        "cells": [c.to_dict() for c in sort_cells(cells)],
        "tightness": tightness,
    }
    if shard is not None:
        report[SHARD_FIELD] = shard.to_dict()
    return report


def inside(folder: Path, name: str) -> Path:
    """``folder / name``; ValueError (one line) unless it stays under ``folder``, links
    resolved: a report's names (its release, a picture's) become file names, and a report may
    come from anyone's CI."""
    path = folder / name
    root = folder.resolve()
    if not path.resolve().is_relative_to(root) or path.resolve() == root:
        raise ValueError(f"{name[:80]!r} would be written outside {folder}")
    return path


def write_pictures(folder: Path, cells: Sequence[CellResult], info: RunInfo) -> list[Picture]:
    """Draws every picture into ``folder`` (needs matplotlib); SVG files it had that this
    report does not draw are removed, so the folder is this report's alone (never a file
    that resolves outside it)."""
    pictures = planned(cells)
    paths = [inside(folder, picture.name) for picture in pictures]  # before anything is drawn
    drawn = draw_all(pictures, cells, info.vllm_version or "unknown")
    for picture, path in zip(pictures, paths, strict=True):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(drawn[picture.name], encoding="utf-8")
    written = set(paths)
    root = folder.resolve()
    for stale in folder.rglob("*.svg"):
        if stale not in written and stale.resolve().is_relative_to(root):
            stale.unlink()
    return pictures


def write_report(
    path: Path, cells: Sequence[CellResult], info: RunInfo, shard: Shard | None = None
) -> None:
    """Writes the Markdown (``.md``, its pictures in the folder of its name beside it), HTML
    (``.html``, self-contained) or JSON (``.json``, with ``shard`` when it is one) report to
    ``path``. Without matplotlib the Markdown and the page say that pictures are off."""
    if path.suffix not in REPORT_SUFFIXES:
        raise ValueError(f"--matrix-report {path}: {REPORT_SUFFIX_HINT}")
    path.parent.mkdir(parents=True, exist_ok=True)
    release = info.vllm_version or "unknown"
    drawing = available()
    if path.suffix == ".json":
        text = json.dumps(json_report(cells, info, shard), indent=2) + "\n"
    elif path.suffix == ".md":
        # The pictures' folder itself stays under the report's (a link there could lead out).
        folder = inside(path.parent, path.stem)
        pictures = write_pictures(folder, cells, info) if drawing else None
        text = markdown_report(cells, info, path.stem, pictures)
    else:
        drawn = planned(cells) if drawing else None
        svgs = draw_all(drawn, cells, release) if drawn else {}
        text = html_page(cells, info, drawn, lambda picture: svgs[picture.name])
    path.write_text(text, encoding="utf-8")
