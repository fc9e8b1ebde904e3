"""The live mode's records and what it prints and writes: a row per cell (the harness's
verdict, the pools run, the live outcomes, agreement), the skipped cells by reason, both
traces of every disagreement, and the JSON. Pure."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matrix.live.outcome import PoolAgreement, outcome_ranges
from matrix.report.fitting import fit_table, terminal_width
from matrix.report.tables import Table, render_markdown
from matrix.wording import plural


@dataclass(frozen=True)
class Disagreement:
    """A pool where the engine and the harness ended differently, with both traces."""

    pool: int
    harness_trace: tuple[str, ...]
    live_trace: tuple[str, ...]


@dataclass(frozen=True)
class LiveCell:
    """One cell of the live mode: skipped with a reason, or its pools run on both sides."""

    case: str  # the case id
    variant: str
    source: str  # file:line
    harness: str = ""  # the harness's verdict, as the case table writes it
    fit: int | None = None
    skipped: str = ""
    pools: tuple[PoolAgreement, ...] = ()
    disagreements: tuple[Disagreement, ...] = ()
    error: str = ""  # the live runs could not complete (a timeout, an engine left unclean)
    seconds: float = 0.0  # the live runs' wall time

    @property
    def agrees(self) -> bool:
        """Every pool run ended on the engine as in the harness, and nothing went wrong."""
        return not self.error and all(pool.agrees for pool in self.pools)


@dataclass(frozen=True)
class LiveReport:
    """A live session: the installed vLLM, the device, every cell, and what it cost."""

    vllm_version: str
    device: str  # the platform, or why none ("" when one ran)
    no_device: str = ""
    pools: str = "all"
    hang_steps: int = 0
    cells: tuple[LiveCell, ...] = ()
    wall_seconds: float = 0.0
    engine_starts: tuple[float, ...] = ()  # seconds each engine took to start
    import_seconds: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)
    invalid: tuple[str, ...] = ()  # a line per case file that did not load

    def ran(self) -> list[LiveCell]:
        """The cells whose pools ran live."""
        return [cell for cell in self.cells if not cell.skipped]

    def failed(self) -> list[LiveCell]:
        """The cells that disagree with the harness or could not complete."""
        return [cell for cell in self.ran() if not cell.agrees]


def agreement_table(report: LiveReport) -> Table:
    """A row per cell that ran: the harness's verdict and outcomes, the engine's, agreement."""
    rows = []
    for cell in report.ran():
        live = cell.error or outcome_ranges(cell.pools)
        rows.append(
            [
                f"{cell.case}-{cell.variant}",
                cell.harness,
                outcome_ranges(cell.pools, harness=True),
                live,
                "yes" if cell.agrees else "NO",
            ]
        )
    return ["cell", "harness verdict", "harness, by pool", "live engine, by pool", "agrees"], rows


def skipped_table(report: LiveReport) -> Table:
    """The skipped cells, grouped by reason, with the cases they belong to."""
    by_reason: dict[str, list[LiveCell]] = {}
    for cell in report.cells:
        if cell.skipped:
            by_reason.setdefault(cell.skipped, []).append(cell)
    rows = []
    for reason, cells in sorted(by_reason.items(), key=lambda item: -len(item[1])):
        cases = sorted({cell.case.split("[")[0] for cell in cells})
        rows.append([str(len(cells)), reason, ", ".join(cases)])
    return ["cells", "skipped because", "cases"], rows


def summary_lines(report: LiveReport) -> list[str]:
    """The session in a few lines: cells run, skipped, agreeing; the costs."""
    invalid = [f"invalid case file: {line}" for line in report.invalid]
    if report.no_device:
        return [f"live engine: every cell skipped: {report.no_device}", *invalid]
    ran, failed = report.ran(), report.failed()
    starts = ", ".join(f"{s:.1f}" for s in report.engine_starts) or "none"
    return [
        f"live engine: vLLM {report.vllm_version} on {report.device}; pools: {report.pools}; "
        f"a hang is {plural(report.hang_steps, 'step')} without progress",
        f"cells: {len(ran)} ran, {len(report.cells) - len(ran)} skipped; "
        f"{len(ran) - len(failed)} agree with the harness, {len(failed)} do not",
        f"pools run live: {sum(len(cell.pools) for cell in ran)}; wall time "
        f"{report.wall_seconds:.1f} s (importing vLLM {report.import_seconds:.1f} s; "
        f"engine starts, s: {starts})",
        *report.notes,
        *invalid,
    ]


def disagreement_lines(report: LiveReport) -> list[str]:
    """Every failed cell: what went wrong, and both traces of each disagreeing pool."""
    lines = []
    for cell in report.failed():
        lines.append(f"{cell.source}: {cell.case}-{cell.variant}: the live engine disagrees")
        if cell.error:
            lines.append(f"  {cell.error}")
        for pool in cell.pools:
            if not pool.agrees:
                detail = f" ({pool.live_detail})" if pool.live_detail else ""
                lines.append(
                    f"  pool {pool.pool}: harness {pool.harness_kind} ({pool.harness}), "
                    f"live {pool.live}{detail}"
                )
        for disagreement in cell.disagreements:
            lines.append(f"  pool {disagreement.pool}, the harness's trace:")
            lines += [f"    {line}" for line in disagreement.harness_trace]
            lines.append(f"  pool {disagreement.pool}, the live engine's trace:")
            lines += [f"    {line}" for line in disagreement.live_trace]
    return lines


def terminal_text(report: LiveReport) -> str:
    """Everything the session prints."""
    parts = []
    width = terminal_width()
    if report.ran():
        parts.append(
            "\n".join(["Live engine vs harness", *fit_table(agreement_table(report), width)])
        )
    if any(cell.skipped for cell in report.cells):
        parts.append("\n".join(["Skipped", *fit_table(skipped_table(report), width)]))
    disagreements = disagreement_lines(report)
    if disagreements:
        parts.append("Disagreements\n" + "\n".join(disagreements))
    parts.append("\n".join(summary_lines(report)))
    return "\n\n".join(parts)


def markdown(report: LiveReport) -> str:
    """The report as Markdown."""
    parts = [f"# Live engine vs harness, vLLM {report.vllm_version}", *summary_lines(report)]
    if report.ran():
        parts.append(render_markdown(agreement_table(report)))
    if any(cell.skipped for cell in report.cells):
        parts += ["## Skipped", render_markdown(skipped_table(report))]
    disagreements = disagreement_lines(report)
    if disagreements:
        parts += ["## Disagreements", "```\n" + "\n".join(disagreements) + "\n```"]
    return "\n\n".join(parts) + "\n"


def to_json(report: LiveReport) -> dict[str, Any]:
    """The report as JSON data: per cell ``live_outcomes`` and ``harness_outcomes`` by pool,
    ``live_agrees``, and both traces of every disagreement."""
    cells = []
    for cell in report.cells:
        record: dict[str, Any] = {
            "case": cell.case,
            "variant": cell.variant,
            "source": cell.source,
        }
        if cell.skipped:
            record["skipped"] = cell.skipped
        else:
            record |= {
                "harness": cell.harness,
                "fit": cell.fit,
                "harness_kinds": {str(p.pool): p.harness_kind for p in cell.pools},
                "harness_outcomes": {str(p.pool): p.harness for p in cell.pools},
                "live_outcomes": {str(p.pool): p.live for p in cell.pools},
                "live_agrees": cell.agrees,
                "live_seconds": round(cell.seconds, 3),
            }
            if cell.error:
                record["live_error"] = cell.error
            if cell.disagreements:
                record["disagreements"] = [
                    {
                        "pool": d.pool,
                        "harness_trace": list(d.harness_trace),
                        "live_trace": list(d.live_trace),
                    }
                    for d in cell.disagreements
                ]
        cells.append(record)
    ran, failed = report.ran(), report.failed()
    return {
        "vllm_version": report.vllm_version,
        "device": report.device,
        "no_device": report.no_device,
        "pools": report.pools,
        "hang_steps": report.hang_steps,
        "invalid_case_files": list(report.invalid),
        "summary": {
            "cells_run": len(ran),
            "cells_skipped": len(report.cells) - len(ran),
            "agree": len(ran) - len(failed),
            "disagree": len(failed),
            "pools_run": sum(len(cell.pools) for cell in ran),
            "wall_seconds": round(report.wall_seconds, 1),
            "import_seconds": round(report.import_seconds, 1),
            "engine_start_seconds": [round(s, 2) for s in report.engine_starts],
        },
        "cells": cells,
    }


def write(path: Path, report: LiveReport) -> None:
    """Writes the report as Markdown (``.md``) or JSON (``.json``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        path.write_text(json.dumps(to_json(report), indent=2) + "\n")
    else:
        path.write_text(markdown(report))


def exit_status(report: LiveReport) -> int:
    """0 when every cell that ran agrees (or no device could run any), else 1; also 1 when a
    device was there but no cell ran (nothing was confirmed), or when a case file did not
    load (as pytest fails it)."""
    if report.invalid:
        return 1
    if report.no_device:
        return 0
    return 1 if report.failed() or not report.ran() else 0
