"""The command line: validate, schema, the benchmark's minimal loop, and its guard: the
harness's overhead over that loop, which CI holds under ``bench.GUARD``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from matrix.__main__ import main
from matrix.releases import RELEASES
from tests.helpers import CASES, needs_vllm


def test_validate_reports_each_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "good.yaml").write_text((CASES / "single_group.yaml").read_text())
    (tmp_path / "bad.yml").write_text("name: bad\ngroups: []\n")
    assert main(["validate", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{tmp_path / 'bad.yml'}:2: groups: List should have at least 1")
    assert lines[1] == f"{tmp_path / 'good.yaml'}: ok, 21 cells"


REDUNDANT = """\
name: r
groups: [{kind: full, block_size: 4}]
speculative: {method: eagle, num_tokens: 1}
pool: 20
requests: [{id: a, prompt: 16}]
expect: {stock: fail, original: fail, fixed: fail}
"""


def test_validate_warns_where_expect_stock_repeats_a_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Stock follows its release unless a case says otherwise; saying what 0.31 on ship
    holds 0.30's stock to it too, which was how 0.30's env came to fail 18 model cells."""
    (tmp_path / "r.yaml").write_text(REDUNDANT)
    (tmp_path / "all.yaml").write_text(
        REDUNDANT.replace("name: r", "name: all").replace(
            "expect: {stock: fail, original: fail, fixed: fail}", "expect: {stock: pass}"
        )
    )
    assert main(["validate", str(tmp_path)]) == 0  # a warning, not an error
    out = capsys.readouterr().out
    margined = ", ".join(r for r, shipped in RELEASES.items() if shipped.ships != "none")
    assert (
        f"{tmp_path / 'r.yaml'}:6: warning: [r] expect.stock: fail repeats what {margined} "
        "ship, and holds stock to it where 0.30 ships none (pass) too: drop it, so "
        "stock follows its release"
    ) in out
    assert "[all] expect.stock: pass repeats what every release ships: drop it" in out
    capsys.readouterr()
    assert main(["validate", str(CASES)]) == 0
    assert "warning" not in capsys.readouterr().out


def test_schema_is_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert {"name", "pool"} <= set(schema["required"])
    assert schema["oneOf"] == [{"required": ["requests"]}, {"required": ["workload"]}]
    assert "described" not in schema["properties"]  # the loader fills it in


@needs_vllm
def test_benchmark_minimal_loop_runs(adapter: Any) -> None:
    from matrix.case.expansion import cells_from_file
    from matrix.tools.bench import BENCH_CELL, direct_loop

    cell = next(c for c in cells_from_file(CASES / "single_group.yaml") if c.test_id == BENCH_CELL)
    # Below the request's fit (7 blocks) it is never admitted; with room it finishes.
    assert direct_loop(cell, [5, 40]) == [False, True]


def test_the_guard_says_the_ratio_and_the_limit() -> None:
    from matrix.tools.bench import Overhead, guard_line

    above = Overhead(loop=0.010, fitting=0.0151, cached=0.0137, repeats=30)
    assert guard_line(above, 1.35) == (
        "bench: harness overhead 1.37x a hand loop with the fit cached (1.51x measuring it), "
        "CPU time, the least of 30; limit 1.35x: above the limit"
    )
    assert guard_line(above, 1.4).endswith("limit 1.40x: ok")
    assert main(["bench", "--max-overhead", "0"]) == 2
