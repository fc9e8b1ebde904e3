"""This process's part of a run, chosen before collection: the run's case files (``--splits N
--group K``, then ``--matrix-worker W/M``), its own share of them balanced by the recorded
durations (:mod:`matrix.case.split`), and which files are case files at all. Read from pytest's
options; imports no torch or vLLM, as the plugin that calls it must not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from matrix.case.expansion import CASE_SUFFIXES
from matrix.case.json_input import read_json
from matrix.case.limits import MAX_REPORT_BYTES
from matrix.case.model_paths import is_model_file
from matrix.case.reading import CaseFileError
from matrix.case.selection import CellFilter, selection_words
from matrix.case.split import Part, RunFile, file_durations, files_of, run_files, selection_digest
from matrix.items import variants_key
from matrix.report.files import matrix_digest

# The cells the run keeps by what they run (--matrix-connector, --matrix-model, ...).
filter_key = pytest.StashKey[CellFilter]()


class RunSplit:
    """This process's part of the run: the run's files, its own (all of them when the run is
    not split), the part it records, and the digest of the run's whole selection."""

    def __init__(self, files: list[RunFile], parts: list[Part], own: list[RunFile], digest: str):
        self.files = {f.path for f in files}
        self.parts = parts
        self.own = {f.path for f in own}
        self.digest = digest

    def ignores(self, path: Path) -> bool:
        """Whether ``path`` is another part's file."""
        resolved = path.resolve()
        return resolved in self.files and resolved not in self.own


def run_split(config: pytest.Config) -> RunSplit:
    """The run's files, and this part's share of them (``--splits N --group K``, then
    ``--matrix-worker W/M``), balanced by the recorded durations (:mod:`matrix.case.split`)."""
    parts = []
    splits, group = config.getoption("splits", None), config.getoption("group", None)
    if splits and group:
        parts.append(Part(group, splits))
    worker = config.getoption("matrix_worker")
    if worker:
        try:
            parts.append(Part.parse(worker))
        except ValueError as error:
            raise pytest.UsageError(f"--matrix-worker {error}") from None
    if not parts:
        return RunSplit([], [], [], "")
    files = run_files(named_paths(config), lambda path: is_case_file(config, path))
    selects = [
        f"-k {config.getoption('keyword')}",
        f"-m {config.getoption('markexpr')}",
        config.stash[filter_key].words(),
        *config.stash[variants_key],
    ]
    digest = selection_digest(files, matrix_digest(), selects)
    return RunSplit(files, parts, files_of(files, parts, _durations(config)), digest)


def _durations(config: pytest.Config) -> dict[str, float]:
    """pytest-split's recorded durations, per file; none when there are none to read."""
    path = config.getoption("durations_path", None)
    if not path or not Path(path).is_file():
        return {}
    try:
        recorded = read_json(Path(path), MAX_REPORT_BYTES, "a durations file")
    except CaseFileError as error:
        raise pytest.UsageError(f"--durations-path: {error}") from None
    if not isinstance(recorded, dict):
        raise pytest.UsageError(f"--durations-path {path}: not a mapping of test ids to seconds")
    return file_durations({k: v for k, v in recorded.items() if isinstance(v, int | float)})


def named_paths(config: pytest.Config) -> list[Path]:
    """The paths named on the command line (a test id's file), resolved."""
    return [Path(config.invocation_params.dir, arg.split("::")[0]).resolve() for arg in config.args]


def is_case_file(config: pytest.Config, path: Path) -> bool:
    """YAML files named on the command line, or under a ``matrix_cases`` directory or a
    directory named on the command line (as pytest collects test files in one); never a model
    description (``models/*.yaml``)."""
    if path.suffix not in CASE_SUFFIXES or is_model_file(path):
        return False
    resolved = path.resolve()
    roots = [Path(p).resolve() for p in config.getini("matrix_cases")]
    named = named_paths(config)
    return resolved in named or any(resolved.is_relative_to(r) for r in [*roots, *named])


def cell_filter(config: pytest.Config) -> CellFilter:
    """The run's filter from its options; raises :class:`SelectionError` for a name no cell
    can have."""
    return CellFilter(
        tuple(config.getoption("matrix_connector")),
        tuple(config.getoption("matrix_model")),
        tuple(config.getoption("matrix_architecture")),
    )


def selection(config: pytest.Config) -> str:
    """How the run was narrowed (its filter, ``-k``, ``-m``), as its reports say it; "" for a
    whole run."""
    return selection_words(
        config.stash[filter_key], config.getoption("keyword"), config.getoption("markexpr")
    )
