"""``matrix explore`` on the installed release: finds the multiple-groups stall of the
original margin (stock on 0.31, the ``original`` variant elsewhere), writes it as a case
file, and ``pytest FILE`` reproduces it: same kind, same failing pools. The same seed gives the
same files, and the example database replays a failure first.

One test: each search shrinks what it finds (a few seconds), and the checks share searches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from matrix.__main__ import main
from tests.helpers import needs_vllm

SEED = 0  # with 10 examples, finds the stall on 0.31 (stock) and on 0.33 (original)
EXAMPLES = "10"


def original_margin() -> str:
    """The variant with the multiple-groups stall: stock where the release ships it."""
    from matrix.installed import installed_vllm_version
    from matrix.releases import shipped_variant

    return "stock" if shipped_variant(installed_vllm_version()) == "original" else "original"


def explore(out: Path, variant: str, seed: int, *more: str) -> int:
    args = ["explore", "--variant", variant, "--max-examples", EXAMPLES, "--out", str(out)]
    return main([*args, "--seed", str(seed), *(more or ("--no-database",))])


def reproduced(case: Path, inline: pytest.Pytester) -> dict[str, Any]:
    """The case run by pytest, as the JSON report's only cell."""
    inline.runpytest_inprocess(str(case), "-q", "-p", "no:cacheprovider", "--matrix-report=r.json")
    cells: list[dict[str, Any]] = json.loads((inline.path / "r.json").read_text())["cells"]
    assert len(cells) == 1
    return cells[0]


def pools(ranges: str) -> list[int]:
    """``4-6,9`` as the pools it names."""
    named: list[int] = []
    for part in ranges.split(","):
        first, _, last = part.partition("-")
        named += range(int(first), int(last or first) + 1)
    return named


@needs_vllm
@pytest.mark.slow
def test_explore_finds_reproduces_repeats_and_replays(
    tmp_path: Path, inline: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    variant = original_margin()
    database = ("--database", str(tmp_path / "db"))
    # Found, written, summarised (the tightness scan asked for), kept in the database.
    assert explore(tmp_path / "found", variant, SEED, *database, "--tightness") == 1
    out = capsys.readouterr().out
    case = tmp_path / "found" / f"found_{variant}_stall_multiple_groups.yaml"
    assert f"{case}: stall: stall at pools" in out
    assert "scenarios/s" in out and f"over-reservation in blocks, {variant}:" in out
    written = case.read_text()
    assert f"variants: [{variant}]" in written
    # pytest reproduces it: the same kind at the same pools.
    failing = written.split("stall at pools ", 1)[1].split(" ", 1)[0]
    cell = reproduced(case, inline)
    assert (cell["variant"], cell["observed"], cell["kind"]) == (variant, "fail", "stall")
    assert cell["failing_pools"] == pools(failing)
    # The same seed and examples give the same files (an empty database changes nothing).
    assert explore(tmp_path / "again", variant, SEED) == 1
    found = {p.name: p.read_text() for p in (tmp_path / "found").iterdir()}
    assert found == {p.name: p.read_text() for p in (tmp_path / "again").iterdir()}
    # Seed 1's own examples find nothing on either release; with the database they do.
    assert explore(tmp_path / "alone", variant, 1) == 0
    assert explore(tmp_path / "replayed", variant, 1, *database) == 1
    assert (tmp_path / "replayed" / case.name).exists()
