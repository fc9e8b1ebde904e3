"""A run narrowed by what its cells run (``--connector``, ``--model``, ``--architecture``):
exact names where ``-k`` matches any part of an id (``-k nixl`` also selected ``nixl_push``),
and a filtered run's reports say so, and name their suite (issue 45's connector frictions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from matrix.case.expansion import cells_from_file
from matrix.case.selection import CellFilter, SelectionError, selection_words
from matrix.report.files import json_report
from matrix.report.info import RunInfo
from matrix.report.markdown import markdown_report
from matrix.report.release_reports import ReportError
from matrix.report.report_data import read_report
from tests.helpers import CASES, REPO, forked_main, needs_vllm
from tests.test_pictures import passing_cell

PROBE = REPO / "connector_cases" / "probe.yaml"


def test_a_connector_is_kept_by_its_exact_name() -> None:
    cells = cells_from_file(PROBE)
    kept = [c for c in cells if CellFilter(connectors=("nixl",)).keeps(c)]
    assert kept and {c.case.definition.connector for c in kept} == {"nixl"}
    assert any("nixl_push" in c.test_id for c in cells)  # what -k nixl also selected
    both = CellFilter(connectors=("nixl", "moriio"))
    assert {c.case.definition.connector for c in cells if both.keeps(c)} == {"nixl", "moriio"}
    with pytest.raises(
        SelectionError,
        match=r"--connector 'nixl-push': no such connector \(did you mean nixl_push\?",
    ):
        CellFilter(connectors=("nixl-push",))


def test_a_model_is_kept_by_its_file_or_its_architecture() -> None:
    llama = cells_from_file(CASES / "model_llama-3.1-8b.yaml")
    table = cells_from_file(CASES / "single_group.yaml")
    by_model, by_class = (
        CellFilter(models=("llama-3.1-8b",)),
        CellFilter(architectures=("LlamaForCausalLM",)),
    )
    assert all(by_model.keeps(c) and by_class.keeps(c) for c in llama)
    assert not any(by_model.keeps(c) or by_class.keeps(c) for c in table)
    assert not any(CellFilter(models=("mistral-7b",)).keeps(c) for c in llama)


def test_a_filter_reads_as_its_options() -> None:
    both = CellFilter(connectors=("offloading",), architectures=("LlamaForCausalLM",))
    assert both.words() == "--connector offloading --architecture LlamaForCausalLM"
    assert selection_words(both, "k1", "") == (
        "--connector offloading --architecture LlamaForCausalLM -k k1"
    )
    assert selection_words(CellFilter(), "", "") == ""


def test_a_report_names_its_suite_and_says_it_was_filtered(tmp_path: Path) -> None:
    info = RunInfo("0.34.0", "fixed", "abc", None, "connectors", "--connector offloading")
    cells = [passing_cell()]
    text = markdown_report(cells, info, "connectors-vllm-0.34.0")
    assert text.startswith("# KV reservation matrix, the connector cases, on vLLM 0.34.0\n")
    assert "**A filtered run** (`--connector offloading`): its cells only" in text
    assert "as `python -m matrix connectors` writes them" in text
    path = tmp_path / "report.json"
    path.write_text(json.dumps(json_report(cells, info)))
    assert read_report(path).info == info
    whole = RunInfo("0.34.0", "fixed", "abc")
    assert "suite" not in json_report(cells, whole) and "selection" not in json_report(cells, whole)
    assert markdown_report(cells, whole).startswith("# KV reservation matrix on vLLM 0.34.0\n")
    path.write_text(json.dumps({**json_report(cells, info), "suite": "other"}))
    with pytest.raises(ReportError, match="suite: 'other': not a suite"):
        read_report(path)


@needs_vllm
def test_connectors_runs_one_connector_and_says_the_run_was_filtered(
    adapter: Any, tmp_path: Path
) -> None:
    args = ["connectors", "--connector", "nixl", "--", "-n", "0", "-k", "stored_prefix"]
    done = forked_main(args, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    (report,) = (tmp_path / "reports").glob("connectors-vllm-*.json")
    data = read_report(report)
    assert data.info.suite == "connectors"
    assert data.info.selection == "--connector nixl -k stored_prefix"
    assert len(data.cells) == 14 and {c.connector for c in data.cells} == {None}
    said = " ".join(done.stdout.split())
    assert "KV reservation matrix, the connector cases, on vLLM" in said
    assert (
        "a filtered run (--connector nixl -k stored_prefix): its reports hold its 14 cells" in said
    )


def test_a_filtered_run_fails_on_skips_only_when_nothing_ran() -> None:
    """A case known to be unsupported under the filter's connector, all its cells skipped, is
    what the filter asked for; a whole run still fails on it, and a filtered one where nothing
    ran."""
    from dataclasses import replace

    from matrix.judge.result import failing_skips

    ran = passing_cell("probe")
    skipped = replace(passing_cell("mamba_none"), observed="skip", kind="skipped", detail="why")
    assert failing_skips([ran, skipped], filtered=True) == []
    assert failing_skips([ran, skipped], filtered=False) == [
        "every cell of case mamba_none is unsupported (1): why"
    ]
    assert failing_skips([skipped], filtered=True) != []


@needs_vllm
def test_one_connector_runs_green_beside_a_case_it_cannot_run(adapter: Any, tmp_path: Path) -> None:
    """``--connector offloading`` takes mamba_none's cells, which Offloading cannot build
    (Mamba 'none'): they are skipped with the reason, and the run is green."""
    args = ["connectors", "--connector", "offloading", "--", "-n", "0"]
    done = forked_main([*args, "-k", "mamba_none or stored_prefix"], tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    said = " ".join(done.stdout.split())
    assert "every cell of case mamba_none_connectors is unsupported (14)" in said
    assert "(a filtered run: not a failure)" in said and "FAILED" not in said
