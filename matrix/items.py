"""The pytest nodes of a case file: the file as a collector, each cell as a test item, a file
that does not load as one failing item. A cell's result record travels in its call report's
properties (``CELL_PROPERTY``; under xdist too); its headline facts are JUnit properties.
Importing this module imports no torch or vLLM.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from matrix.adapters.protocol import VersionAdapter
from matrix.case.expansion import Cell, cells_from_file
from matrix.case.loading import CaseFileError, claim_name
from matrix.judge.result import CellResult, errored_result, skipped_result
from matrix.report.gallery import PictureChoice
from matrix.run.variants import Variant
from matrix.variant_names import BuiltInVariant

CELL_PROPERTY = "matrix_cell"
# The installed release's adapter, or one refusing every case with the reason (chosen once,
# at the first cell, so collection never imports vLLM).
adapter_key = pytest.StashKey[VersionAdapter]()
# The variant the installed release ships, read once from its version (no vLLM import).
ships_key = pytest.StashKey[BuiltInVariant]()
names_key = pytest.StashKey[dict[str, tuple[Path, str]]]()  # case name -> its first file
# The run's variants by name: the built-ins, then the user's (entry points, --matrix-variant).
variants_key = pytest.StashKey[dict[str, Variant]]()
# Which failing cells this process pictures (their pictured pools run again, block by block).
pictures_key = pytest.StashKey[PictureChoice]()
# Whether a file is another part's of a split run (named on the command line, it is collected
# all the same, and gives nothing).
foreign_key = pytest.StashKey[Callable[[Path], bool]]()


class CaseFileCollector(pytest.File):
    """A YAML case file as a pytest file: one test per cell."""

    def collect(self) -> Iterator[pytest.Item]:
        """The file's cells as tests, or one failing test when the file does not load; nothing
        when the file is another part's of a split run."""
        if self.config.stash[foreign_key](self.path):
            return
        try:
            variants = tuple(self.config.stash[variants_key].keys())
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


def skipped_for(config: pytest.Config, cell: Cell) -> CellResult | None:
    """The cell's record when the installed vLLM cannot run it (a feature it lacks, said so
    where the case asks for what the release does not have), or None."""
    if adapter_key not in config.stash:
        from matrix.adapters.selection import adapter_or_refusal

        config.stash[adapter_key] = adapter_or_refusal()
    adapter = config.stash[adapter_key]
    lacking = adapter.lacks(cell.case.definition)
    if lacking:
        return skipped_result(cell, lacking, release_lacks=True)
    reason = adapter.unsupported(cell.case.definition)
    return skipped_result(cell, reason) if reason else None


class CellItem(pytest.Item):
    """One cell (a case under one variant) as a test: run, judged, its result recorded."""

    def __init__(self, *, cell: Cell, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cell = cell

    def runtest(self) -> None:
        """Runs the cell on the installed release; fails when it differs from the case."""
        try:
            result = skipped_for(self.config, self.cell) or self._result()
        except Exception as error:  # whatever raised, the cell is a row that says so
            result = errored_result(self.cell, error)
        self.user_properties.append((CELL_PROPERTY, result.to_dict()))
        self.user_properties.extend(junit_properties(result))
        if result.observed == "skip":
            # The cell still reaches the tables, as skipped, with the reason; reported at the
            # case's line (-rs), as pytest reports a skip marker.
            raise pytest.skip.Exception(result.detail, _use_item_location=True)
        if not result.as_expected:
            judged, variant = self.cell.judged_as, self.cell.variant
            held = variant if judged == variant else f"{variant} or {judged} (what stock ships)"
            default = (
                ""
                if self.cell.case.states_expectation(judged)
                else f" (by default: the case has no expect entry for {held})"
            )
            raise CellMismatch(
                f"expected {result.expected_kind or result.expected}{default}, observed "
                f"{result.observed} ({result.kind}): {result.detail}"
            )

    def _result(self) -> CellResult:
        from matrix.judge.result import result_of
        from matrix.judge.verdict import drawn_pools, judge_run
        from matrix.run.cell import run_cell
        from matrix.run.steps import record_steps

        adapter = self.config.stash[adapter_key]
        variant = self.config.stash[variants_key][self.cell.variant]
        verdict = judge_run(run_cell(adapter, self.cell, variant))
        result = result_of(self.cell, verdict)
        if not self.config.stash[pictures_key].wants(result, str(self.path)):
            return result
        # A pictured cell: its first failing pool and its fit, run again block by block.
        steps = record_steps(adapter, self.cell, variant, drawn_pools(verdict))
        return result_of(self.cell, verdict, steps)

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


def junit_properties(result: CellResult) -> list[tuple[str, str]]:
    """What a CI page shows of a cell (pytest's ``--junitxml`` writes an item's properties)."""
    properties = [
        ("case", result.case),
        ("variant", result.variant),
        ("expected", result.expected_kind or result.expected),
        ("observed", result.observed if result.observed != "fail" else result.kind),
        ("severity", result.severity or "none"),
        ("failing_pools", ",".join(map(str, result.failing_pools))),
    ]
    if result.fit:
        properties.append(("fit", str(result.fit)))
    if result.connector:
        properties.append(("connector", result.connector))
    return properties


def without_cell_record(properties: list[tuple[str, object]]) -> list[tuple[str, object]]:
    """An item's properties without the cell's whole record, which the call report carried:
    JUnit XML then shows the headline properties alone."""
    return [(name, value) for name, value in properties if name != CELL_PROPERTY]
