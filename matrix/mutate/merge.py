"""Shard reports of ``python -m matrix mutate --shard K/N`` merged into the release's report
(``python -m matrix mutate --merge FILES``; no vLLM needed). Shards are CI artifacts: each is
read bounded and checked (``results.MutationReport.from_json`` over the JSON's plain data), and
shards of two releases, of another split, overlapping or missing one are refused.
"""

from __future__ import annotations

from pathlib import Path

from matrix.case.json_input import read_json
from matrix.case.reading import CaseFileError
from matrix.mutate.results import MutationReport, SuiteInfo


class MergeError(Exception):
    """Shards that are not one run's: a one-line reason."""


def _read(path: Path) -> MutationReport:
    data = read_json(path, what="a mutate shard report")
    try:
        return MutationReport.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise MergeError(f"{path}: not a mutate report ({type(error).__name__}: {error})") from None


def _split(report: MutationReport, path: Path) -> tuple[int, int]:
    group, _, splits = report.shard.partition("/")
    if not (group.isdigit() and splits.isdigit()):
        raise MergeError(f"{path}: not a shard's report (no shard K/N)")
    return int(group), int(splits)


def merged(paths: list[Path]) -> MutationReport:
    """One report from every shard of one run; raises :class:`MergeError` or
    ``CaseFileError``."""
    if not paths:
        raise MergeError("no shard reports given")
    reports = {path: _read(path) for path in paths}
    first_path, first = next(iter(reports.items()))
    splits = _split(first, first_path)[1]
    groups: dict[int, Path] = {}
    for path, report in reports.items():
        group, count = _split(report, path)
        if report.vllm != first.vllm or count != splits:
            raise MergeError(
                f"{path}: vLLM {report.vllm}, shard {report.shard}; {first_path}: "
                f"vLLM {first.vllm}, shard {first.shard}"
            )
        if group in groups:
            raise MergeError(f"{path}: shard {report.shard} again (also {groups[group]})")
        if set(report.suites) != set(first.suites):
            raise MergeError(f"{path}: suites {sorted(report.suites)}, not {sorted(first.suites)}")
        groups[group] = path
    missing = sorted(set(range(1, splits + 1)) - set(groups))
    if missing:
        raise MergeError(f"shard(s) {', '.join(f'{g}/{splits}' for g in missing)} missing")
    ordered = [reports[groups[g]] for g in range(1, splits + 1)]
    # Shard K took every Nth mutant from the Kth: its i-th row was the unsharded run's i*N+K-1.
    placed = {
        index * splits + group: row
        for group, report in enumerate(ordered)
        for index, row in enumerate(report.rows)
    }
    rows = [placed[place] for place in sorted(placed)]
    suites = {
        name: SuiteInfo(
            first.suites[name].items,
            first.suites[name].failing,
            round(sum(r.suites[name].cpu for r in ordered), 2),
            round(max(r.suites[name].wall for r in ordered), 2),
            first.suites[name].baseline_cpu,
        )
        for name in first.suites
    }
    return MutationReport(first.vllm, tuple(rows), suites, first.coverage, first.missing)


__all__ = ["CaseFileError", "MergeError", "merged"]
