"""A cell the release cannot run is ``unsupported``, with its reason beside it, in the terminal,
the Markdown, the HTML page and the JSON alike (issue 45: they said ``skip``, and the reason was
only in the JSON). No vLLM needed."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from matrix.judge.result import CellResult, failing_skips, wholly_skipped
from matrix.report.files import json_report, terminal_lines
from matrix.report.html import html_page
from matrix.report.info import RunInfo
from matrix.report.markdown import markdown_report
from matrix.report.tables import brief_cell_text, case_table, cell_text, tightness_table
from tests.test_pictures import passing_cell

WHY = "OffloadingConnector cannot be built with Mamba 'none' (vLLM 0.34.0)"


def _cells() -> list[CellResult]:
    ran = passing_cell("mamba_none[connector=nixl]", "stock")
    skipped = replace(
        passing_cell("mamba_none[connector=offloading]", "stock"),
        observed="skip",
        kind="skipped",
        detail=WHY,
        fit=0,
    )
    return [ran, skipped]


def test_an_unsupported_cell_reads_so_with_its_reason_everywhere() -> None:
    cells = _cells()
    skipped = cells[1]
    assert cell_text(skipped) == f"unsupported: {WHY}"
    assert brief_cell_text(skipped) == "unsupported"
    assert tightness_table(cells)[1][1][1] == "unsupported"
    assert case_table(cells, brief=True)[1][1][1] == "unsupported"
    info = RunInfo("0.34.0", "fixed", "abc", suite="connectors")
    reason = f"unsupported (1 cell, such as mamba_none[connector=offloading]-stock): {WHY}"
    terminal = " ".join(" ".join(terminal_lines(cells, info, 100, [Path("r.md")])).split())
    markdown = markdown_report(cells, info, "r")
    page = html_page(cells, info)
    for text in (terminal, markdown, page.replace("&#x27;", "'")):
        assert reason in text
        assert "skip" not in text.replace("skipped", "")  # one word: unsupported
    assert f"| unsupported: {WHY} |" in markdown  # beside the cell in the full table
    assert "1 pass, 1 unsupported" in markdown
    record = json.loads(json.dumps(json_report(cells, info)))["cells"]
    assert [c["detail"] for c in record if c["observed"] == "skip"] == [WHY]


def test_a_case_asking_for_what_the_release_lacks_is_said_not_failed() -> None:
    """A case of a newer release's feature (0.34's in-flight load gate on 0.33) is
    unsupported there with its reason, and the run is not failed for it; a case the release
    could have run, every cell of it unsupported, still fails the run, and so does a run in
    which nothing ran, whatever the reasons."""
    ran = passing_cell()
    gate = replace(
        ran,
        case="gate",
        observed="skip",
        kind="skipped",
        detail="vLLM 0.33.0 has no scheduler setting max_num_inflight_kv_loads",
        release_lacks=True,
    )
    broken = replace(
        gate, case="broken", detail="cannot derive model x's layout", release_lacks=False
    )
    assert wholly_skipped([ran, gate]) == [
        "every cell of case gate is unsupported (1): vLLM 0.33.0 has no scheduler setting "
        "max_num_inflight_kv_loads"
    ]
    assert failing_skips([ran, gate], filtered=False) == []
    assert failing_skips([ran, gate, broken], filtered=False) == [
        "every cell of case broken is unsupported (1): cannot derive model x's layout"
    ]
    assert failing_skips([gate], filtered=False) != []  # nothing ran
    assert CellResult.from_dict(gate.to_dict()).release_lacks
    assert "release_lacks" not in broken.to_dict()  # reports keep their shape
