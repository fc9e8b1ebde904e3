"""The command line: validate, schema, and the benchmark's minimal loop (not its timings)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from matrix.__main__ import main
from tests.helpers import CASES, needs_vllm


def test_validate_reports_each_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "good.yaml").write_text((CASES / "single_group.yaml").read_text())
    (tmp_path / "bad.yml").write_text("name: bad\ngroups: []\n")
    assert main(["validate", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{tmp_path / 'bad.yml'}:2: groups: List should have at least 1")
    assert lines[1] == f"{tmp_path / 'good.yaml'}: ok, 18 cells"


def test_schema_is_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert {"name", "pool", "requests"} <= set(schema["required"])
    assert "described" not in schema["properties"]  # the loader fills it in


@needs_vllm
def test_benchmark_minimal_loop_runs(adapter: Any) -> None:
    from matrix.case.expansion import cells_from_file
    from matrix.tools.bench import BENCH_CELL, direct_loop

    cell = next(c for c in cells_from_file(CASES / "single_group.yaml") if c.test_id == BENCH_CELL)
    # Below the request's fit (7 blocks) it is never admitted; with room it finishes.
    assert direct_loop(cell, [5, 40]) == [False, True]
