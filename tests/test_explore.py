"""``matrix explore`` on the installed release: finds the multiple-groups stall of the
original margin (stock on 0.31, the ``original`` variant elsewhere), writes it as a case
file, and ``pytest FILE`` reproduces it: same kind, same failing pools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from matrix.__main__ import main
from tests.helpers import needs_vllm

SEED = 0  # with 30 examples, finds the stall on 0.31 (stock) and on 0.33 (original)
EXAMPLES = "30"


def original_margin() -> str:
    """The variant with the multiple-groups stall: stock where the release ships it."""
    from matrix.installed import installed_vllm_version
    from matrix.releases import shipped_variant

    return "stock" if shipped_variant(installed_vllm_version()) == "original" else "original"


def explore(out: Path, variant: str, *more: str) -> tuple[int, str]:
    args = ["explore", "--variant", variant, "--max-examples", EXAMPLES, "--out", str(out)]
    code = main([*args, *(more or ("--seed", str(SEED), "--no-database"))])
    return code, variant


def reproduced(case: Path, inline: pytest.Pytester) -> dict[str, Any]:
    """The case run by pytest, as the JSON report's only cell."""
    inline.runpytest_inprocess(str(case), "-q", "-p", "no:cacheprovider", "--matrix-report=r.json")
    cells: list[dict[str, Any]] = json.loads((inline.path / "r.json").read_text())["cells"]
    assert len(cells) == 1
    return cells[0]


@needs_vllm
def test_explore_finds_the_multiple_groups_stall_and_pytest_reproduces_it(
    tmp_path: Path, inline: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    code, variant = explore(
        tmp_path / "found", original_margin(), "--seed", str(SEED), "--no-database", "--tightness"
    )
    assert code == 1  # failures found
    out = capsys.readouterr().out
    case = tmp_path / "found" / f"found_{variant}_stall_multiple_groups.yaml"
    assert f"{case}: stall: stall at pools" in out
    assert "scenarios/s" in out and f"over-reservation in blocks, {variant}:" in out
    written = case.read_text()
    assert f"variants: [{variant}]" in written
    failing = written.split("stall at pools ", 1)[1].split(" ", 1)[0]
    cell = reproduced(case, inline)
    assert (cell["variant"], cell["observed"], cell["kind"]) == (variant, "fail", "stall")
    assert cell["failing_pools"] == pools(failing)


def pools(ranges: str) -> list[int]:
    """``4-6,9`` as the pools it names."""
    named: list[int] = []
    for part in ranges.split(","):
        first, _, last = part.partition("-")
        named += range(int(first), int(last or first) + 1)
    return named


@needs_vllm
def test_the_same_seed_and_examples_give_the_same_files(tmp_path: Path, adapter: Any) -> None:
    variant = original_margin()
    for run in ("one", "two"):
        explore(tmp_path / run, variant)
    first = {p.name: p.read_text() for p in (tmp_path / "one").iterdir()}
    assert first
    assert first == {p.name: p.read_text() for p in (tmp_path / "two").iterdir()}


@needs_vllm
def test_the_example_database_replays_a_failure_first(tmp_path: Path, adapter: Any) -> None:
    variant = original_margin()
    database = ("--database", str(tmp_path / "db"))
    assert explore(tmp_path / "first", variant, "--seed", str(SEED), *database)[0] == 1
    # Seed 1's own 30 examples find nothing on either release; the database's do.
    assert explore(tmp_path / "alone", variant, "--seed", "1", "--no-database")[0] == 0
    assert explore(tmp_path / "again", variant, "--seed", "1", *database)[0] == 1
    assert (tmp_path / "again" / f"found_{variant}_stall_multiple_groups.yaml").exists()
