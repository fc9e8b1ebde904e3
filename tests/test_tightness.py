"""Over-reservation from a cell's runs, and the tightness table in every report form."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from matrix.judge.result import CellResult
from matrix.judge.runs import RunKind, RunOutcome
from matrix.judge.tightness import over_reservation, tightness_label
from matrix.report.files import RunInfo, markdown_report, write_report
from matrix.report.tables import tightness_table


def runs(*kinds: tuple[int, RunKind]) -> list[RunOutcome]:
    return [RunOutcome(pool, kind, "") for pool, kind in kinds]


def test_over_reservation_is_where_finishing_starts_for_good() -> None:
    # Refused at the fit (10) and 11, finishing from 12 up: 2 blocks reserved beyond need.
    assert (
        over_reservation(
            runs(
                (9, "not_admitted"),
                (10, "not_admitted"),
                (11, "not_admitted"),
                (12, "finished"),
                (13, "finished"),
            ),
            10,
        )
        == 2
    )
    assert over_reservation(runs((10, "finished"), (11, "finished")), 10) == 0
    # Finishing, then failing again higher up: only the run reaching the top counts.
    assert over_reservation(runs((10, "finished"), (11, "stall"), (12, "finished")), 10) == 2
    assert over_reservation(runs((10, "finished"), (11, "not_admitted")), 10) is None


def test_labels() -> None:
    assert tightness_label("stall", None) == "stall"
    assert tightness_label("finished", 0) == "0"
    assert tightness_label("not_admitted", None) == "unfinished"
    assert tightness_label("skipped", None) == "unsupported"


def cell(case: str, variant: str, kind: str, over: int | None) -> CellResult:
    observed = "pass" if kind == "finished" else "fail"
    return CellResult(
        case,
        None,
        variant,
        "pass",
        None,
        observed,
        kind,
        "d",
        "x.yaml:1",  # type: ignore[arg-type]
        observed == "pass",
        fit=5,
        over_reservation=over,
    )


CELLS = [
    cell("multi", "original", "stall", None),
    cell("multi", "fixed", "finished", 0),
    cell("mamba", "group_count", "not_admitted", 2),
]


def test_tightness_table_in_terminal_markdown_and_json(tmp_path: Path) -> None:
    header, rows = tightness_table(CELLS)
    assert header == ["case", "original", "group_count", "fixed"]
    assert rows == [["mamba", "-", "2", "-"], ["multi", "stall", "-", "0"]]
    assert "| multi | stall | - | 0 |" in markdown_report(CELLS, RunInfo("0.33.0"))
    write_report(tmp_path / "r.json", CELLS, RunInfo("0.33.0"))
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["tightness"] == {
        "mamba": {"original": "-", "group_count": "2", "fixed": "-"},
        "multi": {"original": "stall", "group_count": "-", "fixed": "0"},
    }
    assert [c["over_reservation"] for c in data["cells"]] == [2, None, 0]


def test_a_report_without_the_field_still_reads() -> None:
    data = dataclasses.asdict(CELLS[1])
    del data["over_reservation"]
    assert CellResult.from_dict(data).over_reservation is None
