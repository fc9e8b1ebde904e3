"""A shard report read back: a release report with a ``shard`` field, its group, the number of
groups, the cells its files gave (after ``-k`` and ``-m``), and the digest of the run's whole
selection (every file the run collects, the code, ``-k``, ``-m``, the variants), so that
``merge`` can tell a missing shard from a smaller run, and shards of two runs apart; and a
digest of its place over them (``split.place_digest``), so a shard whose group, splits or cells
were changed after it ran is refused. Every field is checked (``report_data``, then the
shard's own).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matrix.case.expansion import TEST_ID
from matrix.case.limits import MAX_SPLITS, MAX_WORKERS
from matrix.case.shipped import SUITES
from matrix.judge.result import CellResult
from matrix.report.files import SHARD_FIELD, RunInfo, Shard
from matrix.report.report_data import NotAReport, ReportError, read_report

SELECTION = re.compile(r"[0-9a-f]{16}")  # a selection or place digest (matrix.case.split)


class MergeError(Exception):
    """Shards that cannot be merged; the message is one line."""


class NotAShard(MergeError):
    """A report that is not a shard's (a release's own, say)."""


@dataclass(frozen=True)
class ShardReport:
    """One shard report, as loaded."""

    path: Path
    info: RunInfo
    shard: Shard
    cells: tuple[CellResult, ...]


def load_shard(path: Path) -> ShardReport:
    """A shard report, every field checked (``report_data``); :class:`MergeError` when it is
    not one."""
    try:
        report = read_report(path)
    except NotAReport as error:
        raise NotAShard(str(error)) from None
    except ReportError as error:
        raise MergeError(str(error)) from None
    shard = report.data.get(SHARD_FIELD)
    if not isinstance(shard, dict):
        raise NotAShard(
            f"{path}: not a shard report (no '{SHARD_FIELD}' field: run it with "
            "--splits N --group K)"
        )
    return ShardReport(path, report.info, _shard(path, shard), report.cells)


def _shard(path: Path, shard: dict[str, Any]) -> Shard:
    """A report's ``shard`` field: group K of N (at most the finest split a run makes), its
    selected cells' ids, its run's selection digest, and its place sealed over them."""
    splits, group = (_whole(path, key, shard.get(key)) for key in ("splits", "group"))
    selected, selection = shard.get("selected"), shard.get("selection")
    if not isinstance(selection, str) or SELECTION.fullmatch(selection) is None:
        raise MergeError(
            f"{path}: shard.selection: {selection!r:.40} is not a selection digest (a shard "
            "written by an older matrix: run it again)"
        )
    most = MAX_SPLITS * MAX_WORKERS
    if not 1 <= splits <= most:
        raise MergeError(f"{path}: shard.splits: {splits:,} groups, not 1 ... {most:,}")
    if not 1 <= group <= splits:
        raise MergeError(f"{path}: shard.group: {group:,} of {splits:,}, not 1 ... {splits:,}")
    if not isinstance(selected, list):
        raise MergeError(f"{path}: shard.selected: a list of the run's cells' ids")
    for index, name in enumerate(selected):
        if not isinstance(name, str) or TEST_ID.fullmatch(name) is None:
            raise MergeError(
                f"{path}: shard.selected.{index}: {name!r:.60} is not a cell id (case-variant)"
            )
    suite = shard.get("suite", "")
    if suite not in SUITES:
        named = ", ".join(repr(s) for s in SUITES if s)
        raise MergeError(f"{path}: shard.suite: {suite!r:.40} is not a suite ({named} or none)")
    read = Shard(group, splits, tuple(selected), selection, suite)
    _check_place(path, shard.get("place"), read)
    return read


def _check_place(path: Path, place: Any, shard: Shard) -> None:
    """Refuses a shard whose group, splits or cells are not those it ran with: its ``place``
    is computed again from them (``split.place_digest``)."""
    if not isinstance(place, str) or SELECTION.fullmatch(place) is None:
        raise MergeError(
            f"{path}: shard.place: {place!r:.40} is not a place digest (a shard written by an "
            "older matrix: run it again)"
        )
    if place != shard.to_dict()["place"]:
        raise MergeError(
            f"{path}: shard: group {shard.group} of {shard.splits} with "
            f"{len(shard.selected)} selected cells is not the place it ran in (shard.place "
            "differs: its group, splits or cells were changed after the run)"
        )


def _whole(path: Path, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MergeError(f"{path}: shard.{key}: {value!r:.40} is not a whole number")
    return value


def shard_paths(paths: Iterable[Path]) -> list[tuple[Path, bool]]:
    """Files as given, and every JSON file of a directory given; each with whether it was
    named (a named file must be a shard; a folder's other reports are skipped, and said so)."""
    found: list[tuple[Path, bool]] = []
    for path in paths:
        found += (
            [(p, False) for p in sorted(path.glob("*.json"))] if path.is_dir() else [(path, True)]
        )
    return found


def unread_entries(paths: Iterable[Path]) -> list[str]:
    """A line for each entry of a directory given that :func:`shard_paths` does not read (a
    subfolder, ``shard3.JSON``, ``shard3``), so an absent group is never a file the merge passed
    over without a word; the JUnit XML a shard writes beside its JSON goes unnamed."""
    return [
        f"{entry}: not a .json file in the folder (a shard is read from the folder itself, "
        "as *.json)"
        for path in paths
        if path.is_dir()
        for entry in sorted(path.iterdir())
        if not (entry.suffix in (".json", ".xml") and entry.is_file())
    ]


def load_shards(found: Sequence[tuple[Path, bool]]) -> tuple[list[ShardReport], list[str]]:
    """The shard reports among ``found``, and a line for each file of a folder that is not one
    (a shard is known by its ``shard`` field, whatever its file is called)."""
    loaded, skipped = [], []
    for path, named in found:
        try:
            loaded.append(load_shard(path))
        except NotAShard as error:
            if named:
                raise
            skipped.append(str(error))
    return loaded, skipped
