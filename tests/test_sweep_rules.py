"""The registry sweep's pure parts (no vLLM): layout classes written and read back, the
baselines read and compared (a changed class named), the class cells' rules and their committed
files, the Registry tables from cells and baselines."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from matrix.architectures import known_to
from matrix.case.baselines import (
    BaselineError,
    Row,
    changes,
    committed,
    parse_rows,
    write_baseline,
)
from matrix.case.class_cases import Shape, class_case, expectations
from matrix.case.format import CaseFile
from matrix.case.layout_class import ClassGroup, class_key, class_slug, parse_class
from matrix.judge.result import CellResult
from matrix.report.registry import architecture_table, registry_table
from matrix.sweep.cells import CELLS, cell_files
from matrix.sweep.summary import change_lines, counts_line, cross_release_lines

GEMMA = "6x sliding_window/16/w1024 + full/16"
HYBRID = "7x mamba/len/none + full/80"


def test_a_class_reads_back_as_written() -> None:
    groups = parse_class(GEMMA)
    assert len(groups) == 7 and groups[-1] == ClassGroup("full", 16)
    assert class_key(groups) == GEMMA
    assert class_key(parse_class(HYBRID)) == HYBRID
    assert class_slug(GEMMA) == "6xswa16w1024_full16"
    assert class_slug("mamba/16/align") == "mamba16align"
    with pytest.raises(ValueError, match="not a layout class group"):
        parse_class("full/16 + cross/16")


def row(name: str, detail: str = "full/16", status: str = "layout") -> Row:
    return Row(name, "text", "llama", status, detail)  # type: ignore[arg-type]


def test_a_changed_class_a_new_and_a_gone_architecture_are_named(tmp_path: Path) -> None:
    baseline = [row("A"), row("B"), row("C", "torchvision", "missing_package")]
    path = tmp_path / "b.tsv"
    write_baseline(path, baseline)
    assert parse_rows(path.read_text(), path) == baseline
    swept = [row("A", GEMMA), row("C", "torchvision", "missing_package"), row("D")]
    lines = [change.line() for change in changes(baseline, swept)]
    assert lines == [
        f"A: was layout: full/16; now layout: {GEMMA}",
        "B: gone (was layout: full/16)",
        "D: new: layout: full/16",
    ]
    assert change_lines([], "0.33.0") == [
        "sweep: every architecture as the vLLM 0.33.0 baseline has it"
    ]
    assert counts_line(swept) == "3 architectures: 2 layout, 1 missing_package"


def test_a_baseline_line_that_does_not_read_names_its_place(tmp_path: Path) -> None:
    path = tmp_path / "b.tsv"
    with pytest.raises(BaselineError, match=r"b\.tsv:2: not 'architecture"):
        parse_rows("# header\nA\ttext\tllama\tsomething\tfull/16\n", path)


def test_every_committed_baseline_names_only_its_releases_architectures() -> None:
    """Each release's baseline reads, and every architecture it holds is in that release's
    recorded registry (nothing invented, each once)."""
    baselines = committed()
    assert {"0.30.0", "0.31.0", "0.32.0", "0.33.0"} <= set(baselines)
    for version, rows in baselines.items():
        names = [r.architecture for r in rows]
        assert len(names) == len(set(names))
        recorded = known_to(version)
        assert recorded is not None and set(names) <= recorded, version
        for found in rows:
            if found.status == "layout":
                parse_class(found.detail)


def test_the_rules_follow_the_layout() -> None:
    one, seven = Shape(1, 0, 16), Shape(7, 0, 16)
    assert expectations(one, None, "k0", "aligned") == {}
    assert expectations(one, None, "eagle1", "aligned") == {"none": "stall"}
    assert expectations(seven, None, "eagle1", "aligned") == {"none": "stall", "original": "stall"}
    past = expectations(seven, None, "eagle1", "past")
    assert set(past) == {"original", "group_count", "all_groups", "fixed"}
    hybrid = Shape(1, 7, 80)
    assert expectations(hybrid, "align", "k0", "past") == dict.fromkeys(
        ("none", "original", "group_count", "all_groups", "fixed"), "stall"
    )
    assert expectations(hybrid, "none", "eagle1", "past") == dict.fromkeys(
        ("group_count", "all_groups"), "not_admitted"
    )
    mamba = Shape(0, 1, 16)
    assert expectations(mamba, "align", "eagle1", "past") == {"none": "stall", "fixed": "stall"}
    assert expectations(mamba, "none", "eagle1", "aligned")["original"] == "not_admitted"


def test_a_class_case_is_a_valid_case_for_every_point() -> None:
    data = class_case(HYBRID)
    assert data["name"] == "class_7xmambalen_full80"
    assert data["pool"] == {"below": 2, "above": 9}
    runs = data["matrix"]["run"]["values"]
    assert len(runs) == 16 and "align-eagle1-past-two" in runs
    CaseFile.model_validate({k: v for k, v in data.items() if k != "matrix"})
    assert (
        "ngram1-aligned-one"
        in class_case("3x chunked_local/16/w8192 + full/16")["matrix"]["run"]["values"]
    )


def test_the_committed_class_cells_are_what_the_rules_give() -> None:
    written = {path.name: path.read_text(encoding="utf-8") for path in CELLS.glob("*.yaml")}
    assert written == cell_files(), "run python -m matrix sweep --write-cells"


def cell(case: str, variant: str, severity: str | None = None, ok: bool = True) -> CellResult:
    return CellResult(
        case=case,
        column=None,
        variant=variant,
        expected="pass",
        expected_kind=None,
        observed="pass" if severity is None else "fail",
        kind="finished" if severity is None else "stall",
        detail="",
        source="x.yaml:1",
        as_expected=ok,
        fit=4,
        failing_pools=(),
        case_digest="0",
        severity=severity,  # type: ignore[arg-type]
    )


def test_the_registry_tables_credit_a_class_and_find_every_architecture() -> None:
    baselines = {
        "0.31.0": (row("LlamaForCausalLM"),),
        "0.33.0": (row("LlamaForCausalLM"), row("MistralForCausalLM"), row("X", "why", "refused")),
    }
    cells = [
        cell("class_full16[run=a]", "stock"),
        cell("class_full16[run=b]", "none", "unpromotable"),
        cell("other", "none", "deadlock"),
    ]
    header, rows = registry_table(cells, baselines)
    assert header == ["class", "0.31.0", "0.33.0", "architectures", "stock", "none"]
    assert rows == [
        ["full16", "1", "2", "LlamaForCausalLM, MistralForCausalLM", "ok", "unpromotable"]
    ]
    _, by_name = architecture_table(baselines)
    assert by_name[-1] == ["X", "-", "refused: why"]
    assert cross_release_lines(baselines)[1].split() == ["LlamaForCausalLM", "full16", "full16"]


def test_a_cell_differing_from_its_expectation_is_marked() -> None:
    baselines = {"0.33.0": (row("A"),)}
    _, rows = registry_table(
        [cell("class_full16[run=a]", "fixed", "deadlock", ok=False)], baselines
    )
    assert rows[0][-1] == "deadlock!"


def test_changing_a_row_is_a_change() -> None:
    base = row("A")
    assert changes([base], [replace(base, status="refused", detail="x")])[0].now == "refused: x"
