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


# A single request on groups of 4 and 8 tokens stalls below its fit under the original margin
# (unpromotable); two such async loads deadlock at pools every request fits.
FINDING = """\
name: finding
groups:
  - {kind: full, block_size: 4}
  - {kind: full, block_size: 8}
speculative: {method: eagle, num_tokens: 7}
pool: 12
requests:
  - {id: a, prompt: 16, max_tokens: 4}
"""


@needs_vllm
def test_the_original_margin_s_unpromotable_finding_escalates_to_a_deadlock(
    tmp_path: Path, inline: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    finding = tmp_path / "finding.yaml"
    finding.write_text(FINDING)
    variant = original_margin()
    # The deadlock must hold on the engine sized for the drawn requests too: 30 draws find one.
    escalate = ("--no-database", "--max-examples", "30", "--escalate", str(finding))
    assert explore(tmp_path / "out", variant, SEED, *escalate) == 1
    out = capsys.readouterr().out
    assert "findings by severity: deadlock 1" in out
    assert f"{finding}: escalates: 1 deadlock case file(s) written" in out
    (case,) = (tmp_path / "out").iterdir()
    written = case.read_text()
    assert written.count("async_load: true") >= 2
    # pytest reproduces the deadlock at a pool the case's every request fits.
    cell = reproduced(case, inline)
    assert (cell["observed"], cell["severity"]) == ("fail", "deadlock")
    assert min(cell["failing_pools"]) >= cell["fit"]


@needs_vllm
def test_a_deployable_trial_runs_from_the_larger_of_the_fit_and_the_startable_pool(
    adapter: Any,
) -> None:
    import yaml

    from matrix.explore.strategies import Draw
    from matrix.explore.trials import trial

    data = yaml.safe_load(FINDING) | {"name": "drawn"}
    data["requests"] = [
        {"id": rid, "prompt": 16, "max_tokens": 4, "async_load": True} for rid in ("a", "b")
    ]
    result = trial(adapter, Draw(data, 0, 1), original_margin(), deployable=True)
    assert result is not None
    # Two requests of 16 + 4 tokens and 7 speculative ones: the fit is 13; an engine sized
    # for them starts with ceil(27 / 4) + ceil(27 / 8) + 1 = 12 blocks.
    assert result.data["pool"] == {"start": 13, "stop": 14}
    if result.failed:
        assert result.severity in ("deadlock", "sizer")
