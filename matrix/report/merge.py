"""Shards: one release's cells split across CI jobs (``--splits N --group K``: whole files
each, :mod:`matrix.case.split`), each writing a JSON report that records its shard
(``shard_reports`` reads one back), merged back into the release's report.

:func:`merge_shards` refuses, in one line, shards that overlap, leave cells or groups out, or
were written by different matrix code, another vLLM or other files; what it returns is exactly
what a single run of those cells would report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matrix.judge.result import CellResult
from matrix.judge.verdict import pool_ranges
from matrix.report.files import (
    REPORT_SUFFIXES,
    RunInfo,
    inside,
    print_summary,
    shown_in,
    write_report,
)
from matrix.report.shard_reports import (
    MergeError,
    ShardReport,
    load_shards,
    shard_paths,
    unread_entries,
)


def cell_id(cell: CellResult) -> str:
    """A cell's id in a run: its test's id (``Cell.test_id``, ``case[axes]-variant``)."""
    return f"{cell.case}-{cell.variant}"


def of_suite(suite: str, name: str) -> str:
    """A report's file name for ``suite``'s (``connectors-<name>``; the shipped cases' bare)."""
    return f"{suite}-{name}" if suite else name


def report_stem(version: str, dev: bool, suite: str = "") -> str:
    """The file name (without suffix) of a release's report of a suite,
    ``[<suite>-]vllm-<version>[-dev]``."""
    return of_suite(suite, f"vllm-{version}{'-dev' if dev else ''}")


def shard_stem(version: str, dev: bool, group: int, splits: int, suite: str = "") -> str:
    """The file name (without suffix) of a release's shard report."""
    return f"{report_stem(version, dev, suite)}.shard-{group}-of-{splits}"


@dataclass(frozen=True)
class Merged:
    """One release's shards merged: the cells and run info a single run would report."""

    info: RunInfo
    cells: tuple[CellResult, ...]
    shards: tuple[Path, ...]


def by_release(reports: Sequence[ShardReport]) -> dict[str, list[ShardReport]]:
    """Shard reports grouped by the suite and the vLLM they ran on (a dev build apart from its
    release)."""
    groups: dict[str, list[ShardReport]] = {}
    for report in reports:
        # the version without release_label's words for a release the matrix does not know
        version = str(report.info.vllm_version).split(" ", 1)[0]
        key = report_stem(version, report.info.source is not None, report.shard.suite)
        groups.setdefault(key, []).append(report)
    return groups


def merge_shards(reports: Sequence[ShardReport], others: Sequence[ShardReport] = ()) -> Merged:
    """One release's shards as a single run's cells; :class:`MergeError` (one line) unless
    they are groups of one split of the same run, each once, covering every cell. ``others``
    are the shards given for other releases: an absent group among them ran another vLLM."""
    merged = combine_shards(reports)
    first = reports[0]
    groups = {report.shard.group for report in reports}
    absent = sorted(set(range(1, first.shard.splits + 1)) - groups)
    if absent:
        raise MergeError(
            f"group {pool_ranges(absent)} of {first.shard.splits} absent (given: "
            f"{', '.join(str(r.path) for r in reports)}){_elsewhere(first, absent, others)}"
        )
    return merged


def _elsewhere(first: ShardReport, absent: Sequence[int], others: Sequence[ShardReport]) -> str:
    """Where an absent group is a shard of the same split and selection merged apart (another
    suite, another vLLM): what differs is what to say, not only that the group is absent."""
    for other in others:
        split = (other.shard.splits, other.shard.selection)
        if split == (first.shard.splits, first.shard.selection) and other.shard.group in absent:
            return f": {other.path} is group {other.shard.group}, but {_apart(first, other)}"
    return ""


def _apart(first: ShardReport, other: ShardReport) -> str:
    """Why ``other`` is merged apart from ``first`` (``by_release``'s key differs): its suite,
    its vLLM's version, or where that vLLM came from."""
    if other.shard.suite != first.shard.suite:
        return f"is of {_suite(other.shard.suite)}, not {_suite(first.shard.suite)}"
    if other.info.vllm_version != first.info.vllm_version:
        return f"ran vLLM {other.info.vllm_version}, not {first.info.vllm_version}"
    return f"ran vLLM {other.info.vllm_version} {_build(other)}, not {_build(first)}"


def _suite(suite: str) -> str:
    return f"the {suite} suite" if suite else "the shipped cases"


def _build(report: ShardReport) -> str:
    source = report.info.source
    return f"from the {source.describe()}" if source is not None else "as released"


def combine_shards(reports: Sequence[ShardReport]) -> Merged:
    """Some shards of one run as one part of it: :class:`MergeError` (one line) when they are
    not from the same run, overlap, or ran different versions of a case."""
    if not reports:
        raise MergeError("no shard reports given")
    first = reports[0]
    for other in reports[1:]:
        _same_run(first, other)
    groups: dict[int, Path] = {}
    owner: dict[str, Path] = {}
    digests: dict[str, tuple[str, Path]] = {}  # case -> its digest, and where it was seen
    for report in reports:
        if report.shard.group in groups:
            raise MergeError(
                f"{report.path} and {groups[report.shard.group]} are both group "
                f"{report.shard.group} of {report.shard.splits}: shards overlap"
            )
        groups[report.shard.group] = report.path
        _holds_its_selection(report)
        for cell in report.cells:
            name = cell_id(cell)
            if name in owner:
                raise MergeError(f"{name} is in {owner[name]} and in {report.path}: shards overlap")
            owner[name] = report.path
            seen, where = digests.setdefault(cell.case, (cell.case_digest, report.path))
            if seen != cell.case_digest:
                raise MergeError(
                    f"{where} and {report.path} ran different versions of case {cell.case} "
                    f"(case digests {seen} vs {cell.case_digest}): a case file changed in between"
                )
    cells = tuple(cell for report in reports for cell in report.cells)
    return Merged(first.info, cells, tuple(r.path for r in reports))


def _holds_its_selection(report: ShardReport) -> None:
    """A shard's cells are exactly the ones its files gave: none missing (a worker that died
    part way), none it did not select."""
    selected = set(report.shard.selected)
    present = {cell_id(cell) for cell in report.cells}
    missing, extra = sorted(selected - present), sorted(present - selected)
    if missing:
        raise MergeError(
            f"{report.path}: {len(missing)} of its {len(selected)} selected cells are not in it "
            f"(the first: {missing[0]})"
        )
    if extra:
        raise MergeError(f"{report.path}: {extra[0]} was not selected by the run it is from")


def _same_run(first: ShardReport, other: ShardReport) -> None:
    """Refuses two shards that are not parts of one run: another matrix code, vLLM, split, or
    selection of cells."""
    pair = f"{first.path} and {other.path}"
    if first.info.matrix_digest != other.info.matrix_digest:
        raise MergeError(
            f"{pair} were written by different matrix code ({first.info.matrix_digest} vs "
            f"{other.info.matrix_digest}): rerun the shards from one commit"
        )
    if first.info != other.info:
        raise MergeError(f"{pair} ran on different vLLM builds: {first.info} vs {other.info}")
    if first.shard.splits != other.shard.splits:
        raise MergeError(
            f"{pair} are from different splits ({first.shard.splits} vs {other.shard.splits} "
            "groups)"
        )
    if first.shard.selection != other.shard.selection:
        raise MergeError(
            f"{pair} are shards of different selections (other files or file contents, -k, -m "
            "or variants): not one run's shards"
        )


def main(paths: Sequence[Path], out: Path, full_terminal: bool = False) -> int:
    """``python -m matrix merge``: each release's shards merged into ``out/vllm-<version>.md``
    and ``.json``, its tables printed (the headline's, or every one with ``full_terminal``);
    2 when shards are refused, 1 when a merged cell differs from its case or every cell of a
    case was skipped (as the run itself would fail)."""
    found = shard_paths(paths)
    if not found:
        print(f"matrix merge: no shard reports in {', '.join(map(str, paths))}")
        return 2
    if out.exists() and not out.is_dir():
        print(f"matrix merge: --out {out}: not a folder")
        return 2
    try:
        loaded, skipped = load_shards(found)
        for line in [*unread_entries(paths), *skipped]:
            print(f"matrix merge: skipped {line}")
        if not loaded:
            raise MergeError(f"no shard reports in {', '.join(map(str, paths))}")
        grouped = by_release(loaded)
        # The release with most shards first: a shard of its run on another vLLM is named.
        done = {
            key: merge_shards(grouped[key], [r for k, g in grouped.items() if k != key for r in g])
            for key in sorted(grouped, key=lambda key: -len(grouped[key]))
        }
        releases = {key: done[key] for key in grouped}
    except MergeError as error:
        print(f"matrix merge: refused: {error}")
        return 2
    failed = False
    for key, merged in releases.items():
        cells = list(merged.cells)
        if not cells:  # every shard empty: the selection ran nothing, which is no pass
            print(f"matrix merge: {key}: every shard is empty: no cell of the selection ran")
            failed = True
            continue
        files = [out / f"{key}{suffix}" for suffix in REPORT_SUFFIXES]
        written = shown_in(files, full_terminal)
        failed |= print_summary(cells, merged.info, written)
        failed |= any(not c.as_expected for c in cells)
        for suffix in REPORT_SUFFIXES:
            try:
                path = inside(out, f"{key}{suffix}")
                write_report(path, cells, merged.info)
            except (OSError, ValueError) as error:  # ValueError: a name leading out of --out
                print(f"matrix merge: cannot write the report: {error}")
                return 2
            print(f"matrix report written to {path}")
        print(f"merged {len(merged.shards)} shards, {len(cells)} cells\n")
    return 1 if failed else 0
