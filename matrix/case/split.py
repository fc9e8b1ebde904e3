"""Which files a part of a run holds: a CI shard (``--splits N --group K``) or one of its
forked workers (``--matrix-worker W/M``) takes whole files, chosen before anything is collected.

Every cell of a case file lands in one process, so a case's fit and start-up sizing are
measured once and its pictures are chosen from all its variants; every test of a module too,
so its module fixtures are paid once. A part collects and builds only its own files: its fixed
cost is the process, not the whole run's collection. The files are balanced by their recorded
durations (pytest-split's file, summed per file) by pytest-split's own least-duration
algorithm (each file to the part with the least so far, longest first: every part has a file
while there are as many files as parts); a shard's workers split the shard's files again, so
shards of one run agree however many workers each machine has.

What a part records of its whole run is :func:`selection_digest`: every file the run would
collect (its path and content), the code, and what selects cells within them (``-k``, ``-m``,
the variants): parts with different digests are not one run's. What it records of its own
place is :func:`place_digest`, over that digest, its group of how many and its cells, so a
merge tells a shard whose place was changed after it ran. Pure, but for reading files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

TEST_FILES = "test_*.py"  # pytest's default python_files: the suite's modules


@dataclass(frozen=True)
class RunFile:
    """A file a run collects: where it is, the key its durations are summed under (its folder
    and name, ``cases/single_group.yaml``: the same in a checkout and an installed package),
    and a digest of its bytes."""

    path: Path
    key: str
    digest: str


@dataclass(frozen=True)
class Part:
    """One part of a split: group ``group`` of ``splits``."""

    group: int
    splits: int

    @classmethod
    def parse(cls, text: str) -> Part:
        """``W/M`` (a worker's option): :class:`ValueError` unless 1 <= W <= M."""
        group, _, splits = text.partition("/")
        part = cls(int(group), int(splits))
        if not 1 <= part.group <= part.splits:
            raise ValueError(f"{text}: W/M with 1 <= W <= M")
        return part


def run_files(roots: Iterable[Path], is_case_file: Callable[[Path], bool]) -> list[RunFile]:
    """The case files and test modules under ``roots`` (files or folders), in path order, each
    once. A file pytest will not collect (a corpus a conftest ignores) may be listed: it only
    weighs on the balance, never on what runs."""
    found: dict[Path, None] = {}
    for root in roots:
        candidates = sorted(root.rglob("*")) if root.is_dir() else [root]
        for path in candidates:
            if path.is_file() and (is_case_file(path) or path.match(TEST_FILES)):
                found.setdefault(path.resolve())
    return [_run_file(path) for path in sorted(found)]


def _run_file(path: Path) -> RunFile:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return RunFile(path, f"{path.parent.name}/{path.name}", digest)


def file_durations(durations: Mapping[str, float]) -> dict[str, float]:
    """pytest-split's recorded durations (test id -> seconds) summed per file key."""
    summed: dict[str, float] = {}
    for test_id, seconds in durations.items():
        path = Path(test_id.split("::", 1)[0])
        key = f"{path.parent.name}/{path.name}"
        summed[key] = summed.get(key, 0.0) + float(seconds)
    return summed


def assign(files: Sequence[RunFile], part: Part, durations: Mapping[str, float]) -> list[RunFile]:
    """The files of ``part``, in path order: pytest-split's least-duration split of the files
    (a file it has no figure for counts as the average)."""
    from pytest_split.algorithms import Algorithms

    # pytest-split reads an item's node id only: a file stands in for its tests.
    units: list[Any] = [SimpleNamespace(nodeid=str(index)) for index in range(len(files))]
    by_unit = {str(i): durations[f.key] for i, f in enumerate(files) if f.key in durations}
    chunks = Algorithms.least_duration.value(part.splits, units, by_unit)
    return sorted((files[int(u.nodeid)] for u in chunks[part.group - 1].selected), key=_path)


def _path(file: RunFile) -> Path:
    return file.path


def files_of(
    files: Sequence[RunFile], parts: Sequence[Part], durations: Mapping[str, float]
) -> list[RunFile]:
    """The files of a part of a part: a shard's, then its worker's share of those."""
    chosen = list(files)
    for part in parts:
        chosen = assign(chosen, part, durations)
    return chosen


def selection_digest(files: Sequence[RunFile], code: str, selects: Sequence[str]) -> str:
    """What makes a run's selection: its files (path keys and contents), the code and the
    options that select cells within them (``-k``, ``-m``, the variants)."""
    lines = [code, *(f"{f.key} {f.digest}" for f in files), *selects]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def place_digest(selection: str, group: int, splits: int, selected: Sequence[str]) -> str:
    """A part's place in its run, as it ran: its run's selection digest, its group of how many
    groups, and the cells its files gave. A merge computes it again from the part's report: a
    shard 1 of 3 relabelled 1 of 1 (which merged into a release's report of its own 7 of the
    run's 28 cells) or given fewer cells no longer matches."""
    lines = [selection, f"{group} of {splits}", *selected]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
