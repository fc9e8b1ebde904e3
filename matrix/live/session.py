"""A live session: every cell of the case files, run by the harness and, where an engine can
run it, live at the harness's pools; one engine at a time, started once per layout."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from _pytest.mark.expression import Expression

from matrix.case.expansion import Cell, case_files, cells_from_file
from matrix.case.format import CaseFile
from matrix.case.reading import CaseFileError
from matrix.installed import expected_stock, installed_vllm_version
from matrix.judge.result import result_of
from matrix.judge.runs import classify_run
from matrix.judge.verdict import judge_run
from matrix.live.outcome import PoolAgreement, PoolChoice, live_outcome, pools_to_run, trace_lines
from matrix.live.platform import detect_device
from matrix.live.report import Disagreement, LiveCell, LiveReport
from matrix.report.tables import cell_text
from matrix.run.cell import run_cell
from matrix.run.playback import CellTimeout, cell_clock
from matrix.run.records import RunTrace
from matrix.run.variants import VARIANTS
from matrix.variant_names import VARIANT_NAMES

if TYPE_CHECKING:  # these import vLLM, which the session imports once the device is known
    from matrix.adapters.handle import Handle
    from matrix.adapters.protocol import VersionAdapter
    from matrix.live.engine import Engines, LiveEngine


@dataclass(frozen=True)
class Options:
    """What a live session runs."""

    paths: tuple[Path, ...]
    pools: PoolChoice = "all"
    hang_steps: int = 8
    keyword: str = ""  # pytest's -k expression over the cells' ids
    variants: tuple[str, ...] = VARIANT_NAMES


def keyword_filter(expression: str) -> Callable[[str], bool]:
    """pytest's ``-k``: a match expression (``two_loads and not none``) over a cell's id and
    its file's name, each word a case-insensitive substring. Raises ``ValueError`` (one line)
    for a malformed expression."""
    if not expression:
        return lambda name: True
    try:
        compiled = Expression.compile(expression)
    except Exception as error:  # pytest's ParseError or SyntaxError, by version
        raise ValueError(f"-k {expression!r}: {str(error).splitlines()[0]}") from error

    def matches(name: str) -> bool:
        def contains(word: str, /, **kwargs: str | int | bool | None) -> bool:
            return word.lower() in name.lower()

        return compiled.evaluate(contains)

    return matches


def session_cells(options: Options) -> tuple[list[Cell], list[str]]:
    """The cells of the case files named, in a stable order, filtered by the options; and a
    line (``file:line: message``) per case file that does not load: the others still run."""
    ships = expected_stock()
    matches = keyword_filter(options.keyword)
    cells: list[Cell] = []
    invalid: list[str] = []
    for path in options.paths:
        for case_file in case_files(path):
            try:
                cells += cells_from_file(case_file, ships, VARIANT_NAMES)
            except CaseFileError as error:
                invalid.append(str(error))
    chosen = [
        cell
        for cell in cells
        if cell.variant in options.variants and matches(f"{cell.test_id} {cell.case.source.name}")
    ]
    return chosen, invalid


def run_session(
    options: Options,
    say: Callable[[str], None],
    selection: tuple[list[Cell], list[str]],
) -> LiveReport:
    """Runs the session: the options' cells (``selection``: ``session_cells``' answer); ``say``
    hears a line per cell that ran, as it ends. The report lists the case files that did not
    load."""
    started = time.monotonic()
    cells, invalid = selection
    version = installed_vllm_version() or "none"
    device = detect_device()
    if isinstance(device, str):
        return LiveReport(
            version, "", no_device=device, pools=options.pools, invalid=tuple(invalid)
        )
    # vLLM is imported once the offline switches and the platform's settings are in place.
    from matrix.adapters.selection import select_adapter
    from matrix.live.engine import Engines

    adapter = select_adapter()
    imported = time.monotonic() - started
    session = _Session(adapter, Engines(device), device.on_cpu, options)
    records: list[LiveCell] = []
    for cell in cells:
        record = session.cell(cell)
        records.append(record)
        if not record.skipped:
            say(f"{record.case}-{record.variant}: {'agrees' if record.agrees else 'DISAGREES'}")
    session.engines.discard()
    return LiveReport(
        version,
        device.name,
        pools=options.pools,
        hang_steps=options.hang_steps,
        cells=tuple(records),
        wall_seconds=time.monotonic() - started,
        engine_starts=tuple(session.engines.starts),
        import_seconds=imported,
        invalid=tuple(invalid),
    )


class _Session:
    """What the cells of a session share: the harness's adapter and the live engines."""

    def __init__(
        self, adapter: VersionAdapter, engines: Engines, on_cpu: bool, options: Options
    ) -> None:
        self.adapter = adapter
        self.handle_type: type[Handle] | None = getattr(adapter, "handle_type", None)
        self.engines = engines
        self.on_cpu = on_cpu
        self.options = options
        self._cases: dict[tuple[str, str], tuple[CaseFile, str]] = {}

    def cell(self, cell: Cell) -> LiveCell:
        """One cell: skipped with the reason, or the harness's runs and the live ones."""
        named = (cell.case.case_id, cell.variant, f"{cell.case.source.name}:{cell.line}")
        case, reason = self._resolved(cell)
        if reason or self.handle_type is None:
            return LiveCell(*named, skipped=reason)
        harness = run_cell(self.adapter, cell, VARIANTS[cell.variant])
        if harness.error or harness.timeout:
            why = f"the harness could not run it: {harness.error or harness.timeout}"
            return LiveCell(*named, skipped=why)
        verdict = judge_run(harness)
        swept = {trace.pool: trace for trace in harness.traces}
        pools = pools_to_run(sorted(swept), verdict.failing_pools, self.options.pools, harness.fit)
        engine = self.engines.get(case, max(pools, default=2))
        if isinstance(engine, str):
            return LiveCell(*named, skipped=engine)
        began = time.monotonic()
        agreements, disagreements, error = self._live_runs(engine, case, cell.variant, pools, swept)
        return LiveCell(
            *named,
            harness=cell_text(result_of(cell, verdict)),
            fit=harness.fit,
            pools=tuple(agreements),
            disagreements=tuple(disagreements),
            error=error,
            seconds=time.monotonic() - began,
        )

    def _resolved(self, cell: Cell) -> tuple[CaseFile, str]:
        """The cell's case with its groups, and why it cannot run live ("" when it can);
        once per case (its variants' cells share it)."""
        from matrix.live.layout import live_unsupported

        key = str(cell.case.source), cell.case.case_id
        if key not in self._cases:
            definition = cell.case.definition
            reason = self.adapter.unsupported(definition)
            case = definition if reason else self.adapter.resolve(definition)
            reason = reason or live_unsupported(case, self.on_cpu)
            if self.handle_type is None:
                reason = f"the {self.adapter.release} adapter has no handle class to drive"
            self._cases[key] = case, reason or ""
        return self._cases[key]

    def _live_runs(
        self,
        engine: LiveEngine,
        case: CaseFile,
        variant: str,
        pools: list[int],
        harness: dict[int, RunTrace],
    ) -> tuple[list[PoolAgreement], list[Disagreement], str]:
        """The live run of each pool, beside the harness's; stops at a timeout or an engine
        left unclean (then discarded), saying so."""
        from matrix.live.runs import UncleanEngine, run_live_pool

        assert self.handle_type is not None
        deadline = cell_clock() + case.limit("seconds")
        agreements: list[PoolAgreement] = []
        disagreements: list[Disagreement] = []
        for pool in pools:
            try:
                live = run_live_pool(
                    engine,
                    self.handle_type,
                    case,
                    VARIANTS[variant],
                    pool,
                    self.options.hang_steps,
                    deadline,
                )
            except (CellTimeout, UncleanEngine) as problem:
                self.engines.discard()
                return (
                    agreements,
                    disagreements,
                    f"pool {pool}: {type(problem).__name__}: {problem}",
                )
            agreement = _agreement(harness[pool], live)
            agreements.append(agreement)
            if not agreement.agrees:
                disagreements.append(
                    Disagreement(pool, tuple(trace_lines(harness[pool])), tuple(trace_lines(live)))
                )
        return agreements, disagreements, ""


def _agreement(harness: RunTrace, live: RunTrace) -> PoolAgreement:
    return PoolAgreement(
        harness.pool,
        classify_run(harness).kind,
        live_outcome(harness),
        live_outcome(live),
        live.message,
    )
