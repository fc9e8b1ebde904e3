"""pytest glue: YAML case files become tests, cells travel in report properties, tables print
at the end. Thin hooks over pure functions; importing this module imports no torch or vLLM, so
``pytest_configure`` can pin a GPU per xdist worker before anything touches CUDA.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from matrix.adapters.protocol import VersionAdapter
from matrix.case.expansion import CASE_SUFFIXES, Cell, cells_from_file
from matrix.case.loading import CaseFileError, claim_name
from matrix.case.model_paths import is_model_file
from matrix.case.shipped import shipped_cases
from matrix.gpus import pin_worker_gpu
from matrix.installed import expected_stock
from matrix.judge.result import CellResult, result_of, skipped_result, wholly_skipped
from matrix.report.files import run_info, terminal_lines, write_report
from matrix.report.tables import sort_cells
from matrix.run.user_variants import VariantLoadError, run_variants
from matrix.run.variants import Variant
from matrix.variant_names import BuiltInVariant

CELL_PROPERTY = "matrix_cell"
cells_key = pytest.StashKey[list[CellResult]]()
# The installed release's adapter, or one refusing every case with the reason (chosen once,
# at the first cell, so collection never imports vLLM).
adapter_key = pytest.StashKey[VersionAdapter]()
# The variant the installed release ships, read once from its version (no vLLM import).
ships_key = pytest.StashKey[BuiltInVariant]()
names_key = pytest.StashKey[dict[str, tuple[Path, str]]]()  # case name -> its first file
# The run's variants by name: the built-ins, then the user's (entry points, --matrix-variant).
variants_key = pytest.StashKey[dict[str, Variant]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Adds the matrix's command-line options and its ``matrix_cases`` ini setting."""
    group = parser.getgroup("matrix", "vLLM KV reservation matrix")
    group.addoption(
        "--matrix-report",
        action="append",
        default=[],
        metavar="PATH",
        help="write the results as Markdown (.md) or JSON (.json); repeatable",
    )
    group.addoption(
        "--matrix-gpus",
        default=None,
        metavar="IDS",
        help="comma-separated GPU ids; each xdist worker is pinned to one of them "
        "(default: CUDA_VISIBLE_DEVICES when it lists several)",
    )
    group.addoption(
        "--matrix-variant",
        action="append",
        default=[],
        metavar="MODULE:NAME",
        help="also run a reservation variant of your own: package.module:NAME or "
        "path/to/file.py:NAME (docs/variants.md); repeatable",
    )
    group.addoption(
        "--matrix-cases",
        action="store_true",
        default=False,
        help="run the shipped cases (from the installed package), beside any paths given",
    )
    parser.addini(
        "matrix_cases",
        type="paths",
        default=[],
        help="directories whose *.yaml files are matrix cases",
    )


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
        if Path(path).suffix not in (".md", ".json"):
            raise pytest.UsageError(f"--matrix-report {path}: use a .md or .json file name")
    config.stash[cells_key] = []
    config.stash[ships_key] = expected_stock()
    config.pluginmanager.register(CellCollector(config), "matrix-cells")
    pin_worker_gpu(config.getoption("matrix_gpus"))


def _add_shipped_cases(config: pytest.Config) -> None:
    """``--matrix-cases``: the shipped cases join the paths named on the command line, or
    replace pytest's default (testpaths or the current directory) when none was named."""
    shipped = str(shipped_cases())
    named = config.args_source == pytest.Config.ArgsSource.ARGS
    config.args[:] = [*config.args, shipped] if named else [shipped]


def _named_paths(config: pytest.Config) -> list[Path]:
    return [Path(config.invocation_params.dir, arg.split("::")[0]).resolve() for arg in config.args]


def _is_case_file(config: pytest.Config, path: Path) -> bool:
    """YAML files named on the command line, or under a ``matrix_cases`` directory or a
    directory named on the command line (as pytest collects test files in one); never a model
    description (``models/*.yaml``)."""
    if path.suffix not in CASE_SUFFIXES or is_model_file(path):
        return False
    resolved = path.resolve()
    roots = [Path(p).resolve() for p in config.getini("matrix_cases")]
    named = _named_paths(config)
    return resolved in named or any(resolved.is_relative_to(r) for r in [*roots, *named])


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect items
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A named directory that gave nothing to run says why, instead of "no tests ran"."""
    collected = [Path(item.path).resolve() for item in items]
    for path in _named_paths(config):
        if path.is_dir() and not any(p.is_relative_to(path) for p in collected):
            raise pytest.UsageError(
                f"{path}: no case files ({', '.join('*' + s for s in CASE_SUFFIXES)}) and no tests"
            )


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    """A collector for a case file; None for any other file."""
    if _is_case_file(parent.config, file_path):
        return CaseFileCollector.from_parent(parent, path=file_path)
    return None


def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A collector for a directory named like a case file; None for any other directory."""
    # A directory named like a case file is a mistake to report, not a folder to search.
    return pytest_collect_file(parent, path)


class CaseFileCollector(pytest.File):
    """A YAML case file as a pytest file: one test per cell."""

    def collect(self) -> Iterator[pytest.Item]:
        """The file's cells as tests, or one failing test when the file does not load."""
        try:
            run_variants_by_name = self.config.stash[variants_key]
            variants = tuple(run_variants_by_name)
            cells = cells_from_file(self.path, self.config.stash[ships_key], variants)
            if cells:
                names = self.config.stash.setdefault(names_key, {})
                claim_name(names, cells[0].case.definition.name, self.path, cells[0].case.line)
        except CaseFileError as error:
            yield InvalidCaseFile.from_parent(self, name="invalid", problem=str(error))
            return
        for cell in cells:
            item = CellItem.from_parent(self, name=cell.test_id, cell=cell)
            item.add_marker("matrix")
            item.add_marker(cell.variant)
            yield item


class InvalidCaseFile(pytest.Item):
    """A case file that does not load: one failing test with a one-line reason."""

    def __init__(self, *, problem: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.problem = problem

    def runtest(self) -> None:
        """Fails with the reason the case file does not load."""
        raise InvalidCase(self.problem)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        """The reason, in one line."""
        return self.problem

    def reportinfo(self) -> tuple[Path, int, str]:
        """The case file, named as an invalid case file."""
        return self.path, 0, f"{self.path.name}: invalid case file"


class CellMismatch(Exception):
    """An observed cell differs from the case's expectation."""


class InvalidCase(Exception):
    """A case file that does not load."""


def skip_reason(config: pytest.Config, cell: Cell) -> str | None:
    """Why the installed vLLM cannot run this cell (a feature it lacks), or None."""
    if adapter_key not in config.stash:
        from matrix.adapters.selection import adapter_or_refusal

        config.stash[adapter_key] = adapter_or_refusal()
    return config.stash[adapter_key].unsupported(cell.case.definition)


class CellItem(pytest.Item):
    """One cell (a case under one variant) as a test: run, judged, its result recorded."""

    def __init__(self, *, cell: Cell, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cell = cell

    def runtest(self) -> None:
        """Runs the cell on the installed release; fails when it differs from the case."""
        from matrix.judge.verdict import judge_run
        from matrix.run.cell import run_cell

        missing = skip_reason(self.config, self.cell)
        if missing:
            # The cell still reaches the tables, as skipped, with the reason.
            skipped = skipped_result(self.cell, missing)
            self.user_properties.append((CELL_PROPERTY, skipped.to_dict()))
            # Reported at the case's line (-rs), as pytest reports a skip marker.
            raise pytest.skip.Exception(missing, _use_item_location=True)
        variant = self.config.stash[variants_key][self.cell.variant]
        verdict = judge_run(run_cell(self.config.stash[adapter_key], self.cell, variant))
        result = result_of(self.cell, verdict)
        self.user_properties.append((CELL_PROPERTY, result.to_dict()))
        if not result.as_expected:
            raise CellMismatch(
                f"expected {self.cell.expected}, observed {verdict.observed} "
                f"({verdict.kind}): {verdict.detail}"
            )

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None
    ) -> str | Any:
        """A mismatch in one line at the expectation's place in the case file."""
        if isinstance(excinfo.value, CellMismatch):
            return f"{self.cell.case.source}:{self.cell.line}: {excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        """The case file and the line of the cell's expectation."""
        return self.path, self.cell.line - 1, self.name


class CellCollector:
    """Gathers cells from test reports; under xdist the controller receives the workers'
    reports, properties included, so the tables are whole."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keeps the cell result a test recorded in its call phase."""
        if report.when != "call":  # skipped cells, too, are skipped in the call
            return
        for name, value in report.user_properties:
            if name == CELL_PROPERTY and isinstance(value, dict):
                self.config.stash[cells_key].append(CellResult.from_dict(value))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run that skipped every cell of a case or a model tested nothing of it: it fails
    (the terminal summary says which, and why)."""
    if hasattr(session.config, "workerinput") or exitstatus != pytest.ExitCode.OK:
        return
    if wholly_skipped(session.config.stash.get(cells_key, [])):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    """Prints the tables and writes the ``--matrix-report`` files (on the xdist controller only)."""
    if hasattr(config, "workerinput"):
        return
    collected: list[CellResult] = config.stash[cells_key]
    cells = sort_cells(collected)
    if not cells:
        return
    info = run_info()
    terminalreporter.section(f"KV reservation matrix, vLLM {info.vllm_version}")
    for line in terminal_lines(cells, info):
        terminalreporter.write_line(line)
    for line in wholly_skipped(cells):
        terminalreporter.write_line(f"matrix: FAILED: {line}", red=True)
    for path in config.getoption("matrix_report"):
        write_report(Path(path), cells, info)
        terminalreporter.write_line(f"matrix report written to {path}")
