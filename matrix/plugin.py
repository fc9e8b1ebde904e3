"""pytest glue: YAML case files become tests, cells travel in report properties, tables print
at the end. Thin hooks over pure functions; importing this module imports no torch or vLLM, so
``pytest_configure`` can pin a GPU per xdist worker before anything touches CUDA.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from matrix.case.expansion import CASE_SUFFIXES
from matrix.case.shipped import shipped_cases
from matrix.gpus import pin_worker_gpu
from matrix.installed import expected_stock
from matrix.items import (
    CELL_PROPERTY,
    CaseFileCollector,
    CellItem,
    foreign_key,
    pictures_key,
    ships_key,
    variants_key,
    without_cell_record,
)
from matrix.judge.result import CellResult, failing_skips
from matrix.plugin_options import add_options
from matrix.report.files import (
    EMPTY_RUN,
    REPORT_SUFFIX_HINT,
    REPORT_SUFFIXES,
    Shard,
    empty_shard_line,
    filtered_note,
    run_info,
    shown_in,
    summary_lines,
    write_report,
)
from matrix.report.gallery import PictureChoice, available, full_gallery
from matrix.report.tables import sort_cells
from matrix.run.user_variants import VariantLoadError, run_variants
from matrix.runner.process_share import (
    RunSplit,
    cell_filter,
    filter_key,
    is_case_file,
    named_paths,
    run_split,
    selection,
)

cells_key = pytest.StashKey[list[CellResult]]()
# The cells this part of the run selected (after -k and -m), from its own files.
selected_key = pytest.StashKey[tuple[str, ...]]()
SELECTED_OUTPUT = "matrix_selected"  # the selection, sent from an xdist worker to its controller
split_key = pytest.StashKey[RunSplit]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Adds the matrix's command-line options and its ``matrix_cases`` ini setting."""
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    """Loads the variants, checks the options, registers the collector, pins the worker's GPU."""
    config.addinivalue_line("markers", "matrix: a vLLM KV reservation matrix cell")
    # Loaded here (in every xdist worker too), before collection; a variant module imports
    # matrix.run.variants, never vLLM, so this stays free of torch.
    try:
        config.stash[variants_key] = run_variants(config.getoption("matrix_variant"))
    except VariantLoadError as error:
        raise pytest.UsageError(f"--matrix-variant: {error}") from None
    for variant in config.stash[variants_key]:
        config.addinivalue_line("markers", f"{variant}: a matrix cell of the {variant} variant")
    if config.getoption("matrix_cases"):
        _add_shipped_cases(config)
    for path in config.getoption("matrix_report"):
        if Path(path).suffix not in REPORT_SUFFIXES:
            raise pytest.UsageError(f"--matrix-report {path}: {REPORT_SUFFIX_HINT}")
    config.stash[cells_key] = []
    try:
        config.stash[ships_key] = expected_stock()
        config.stash[filter_key] = cell_filter(config)
    except ValueError as error:  # SelectionError too
        raise pytest.UsageError(str(error)) from None
    config.pluginmanager.register(CellCollector(config), "matrix-cells")
    config.stash[split_key] = run_split(config)
    config.stash[foreign_key] = config.stash[split_key].ignores
    config.stash[pictures_key] = PictureChoice(available(), full_gallery())
    if getattr(config.option, "dist", "no") == "load":  # xdist: a case file to one worker
        config.option.dist = "loadfile"
    pin_worker_gpu(config.getoption("matrix_gpus"))


def _add_shipped_cases(config: pytest.Config) -> None:
    """``--matrix-cases``: the shipped cases join the paths named on the command line, or
    replace pytest's default (testpaths or the current directory) when none was named."""
    shipped = str(shipped_cases())
    named = config.args_source == pytest.Config.ArgsSource.ARGS
    config.args[:] = [*config.args, shipped] if named else [shipped]


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """The run is split by whole files here, before collection: pytest-split's own split of the
    collected tests would split again what is left."""
    if session.config.stash[split_key].parts:
        session.config.pluginmanager.unregister(name="pytestsplitplugin")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Another part's file is not collected at all (where pytest finds it in a folder)."""
    return True if config.stash[split_key].ignores(collection_path) else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Records the cells this part of the run selected (its own files' cells, after ``-k`` and
    ``-m`` deselect), which its report must hold."""
    selected = tuple(item.cell.test_id for item in items if isinstance(item, CellItem))
    config.stash[selected_key] = selected
    if hasattr(config, "workeroutput"):  # an xdist worker: its controller collects nothing
        config.workeroutput[SELECTED_OUTPUT] = selected


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """On the xdist controller: the run's selection, as a worker collected it."""
    selected = getattr(node, "workeroutput", {}).get(SELECTED_OUTPUT)
    if selected is not None:
        node.config.stash[selected_key] = tuple(selected)


def _named_directories_hold_cases(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A named directory that gave nothing to run says why, instead of "no tests ran"."""
    collected = [Path(item.path).resolve() for item in items]
    for path in named_paths(config):
        if path.is_dir() and not any(p.is_relative_to(path) for p in collected):
            raise pytest.UsageError(
                f"{path}: no case files ({', '.join('*' + s for s in CASE_SUFFIXES)}) and no tests"
            )


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    """A collector for a case file; None for any other file."""
    if is_case_file(parent.config, file_path):
        return CaseFileCollector.from_parent(parent, path=file_path)
    return None


def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A collector for a directory named like a case file; None for any other directory."""
    # A directory named like a case file is a mistake to report, not a folder to search.
    return pytest_collect_file(parent, path)


class CellCollector:
    """Gathers cells from test reports; under xdist the controller receives the workers'
    reports, properties included, so the tables are whole."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(tryfirst=True)  # before -k and -m deselect items
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Another part's tests that were collected all the same (a file named on the command
        line is collected whatever ``pytest_ignore_collect`` says), and cells the run's filter
        (``--matrix-connector``, ...) leaves out, are deselected; a named directory that gave
        nothing to run is an error (in a whole run: a part's files may all be another
        part's)."""
        split, keep = self.config.stash[split_key], self.config.stash[filter_key]
        if not split.parts:
            _named_directories_hold_cases(self.config, items)
        dropped = [
            item
            for item in items
            if split.ignores(Path(item.path))
            or (isinstance(item, CellItem) and not keep.keeps(item.cell))
        ]
        if dropped:
            gone = set(map(id, dropped))
            items[:] = [item for item in items if id(item) not in gone]
            self.config.hook.pytest_deselected(items=dropped)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keeps the cell result a test recorded in its call phase."""
        if report.when != "call":  # skipped cells, too, are skipped in the call
            return
        for name, value in report.user_properties:
            if name == CELL_PROPERTY and isinstance(value, dict):
                self.config.stash[cells_key].append(CellResult.from_dict(value))

    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        """The teardown report, whose properties JUnit XML writes, keeps the headline ones."""
        item.user_properties[:] = without_cell_record(item.user_properties)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run that skipped every cell of a case or a model tested nothing of it: it fails
    (the terminal summary says which, and why), unless a filter chose its cells and some ran.
    A CI shard whose files hold no cell of the selection is an empty shard, not pytest's
    no-tests exit (its report says it selected none; the merge fails when every shard is
    empty); so is any run told it may be empty."""
    if hasattr(session.config, "workerinput"):
        return
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and _may_be_empty(session.config):
        session.exitstatus = pytest.ExitCode.OK
        return
    if exitstatus != pytest.ExitCode.OK:
        return
    cells = session.config.stash.get(cells_key, [])
    if failing_skips(cells, bool(selection(session.config))):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _may_be_empty(config: pytest.Config) -> bool:
    """Whether no cell here is an empty run: a CI shard's, or one told so."""
    return bool(config.getoption("splits", None)) or config.getoption("matrix_may_be_empty")


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    """Prints the tables and writes the ``--matrix-report`` files (on the xdist controller only)."""
    if hasattr(config, "workerinput"):
        return
    collected: list[CellResult] = config.stash[cells_key]
    cells = sort_cells(collected)
    shard = _shard(config)
    if not cells and shard is None:  # a part with no cells still says which part it is
        if _may_be_empty(config):
            terminalreporter.write_line(EMPTY_RUN)
        return
    info = run_info(config.getoption("matrix_suite"), selection(config))
    if not cells and not config.getoption("matrix_no_tables") and shard is not None:
        terminalreporter.write_line(empty_shard_line(shard.group, shard.splits))
    if cells and not config.getoption("matrix_no_tables"):
        terminalreporter.section(info.title())
        paths = [Path(p) for p in config.getoption("matrix_report")]
        written = shown_in(paths, config.getoption("matrix_full_terminal"))
        for line in summary_lines(cells, info, written):
            terminalreporter.write_line(line, red=line.startswith("matrix: FAILED"))
    for path in config.getoption("matrix_report"):
        write_report(Path(path), cells, info, shard)
        terminalreporter.write_line(f"matrix report written to {path}")
    note = filtered_note(cells, info)
    if note and config.getoption("matrix_report") and not config.getoption("matrix_no_tables"):
        terminalreporter.write_line(note)
    if cells and config.getoption("matrix_draw_ahead") and available():
        from matrix.report.drawing import draw_ahead

        draw_ahead(cells, info.vllm_version or "unknown")


def _shard(config: pytest.Config) -> Shard | None:
    """The part of the run these cells are, when the run is split."""
    split = config.stash[split_key]
    selected = config.stash.get(selected_key, None)
    if not split.parts or selected is None:
        return None
    suite = config.getoption("matrix_suite")
    return Shard(split.parts[-1].group, split.parts[-1].splits, selected, split.digest, suite)
