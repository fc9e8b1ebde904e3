"""``python -m matrix explore --mutant ID``: a written scenario judged under stock and, in a
forked child, under a mutant of the reservation surface; an unknown id is one line before any
search."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from matrix.__main__ import main
from tests.helpers import needs_vllm

SCENARIO = """\
name: small
groups:
  - {kind: full, block_size: 4}
pool: {start: 8, stop: 9}
requests:
  - {id: a, prompt: 16}
"""


def _mutant(function: str, operator: str) -> str:
    from matrix.installed import installed_vllm_version
    from matrix.mutate.generate import surface_mutants, vllm_root
    from matrix.mutate.surface import surface_for

    mutants, _ = surface_mutants(surface_for(installed_vllm_version() or ""), vllm_root())
    found = [m.id for m in mutants if m.function == function and m.operator == operator]
    if not found:
        pytest.skip("this release has no reservation surface listed (matrix/mutate/surface.py)")
    return found[0]


@needs_vllm
def test_a_mutant_changes_the_verdict_in_its_child_and_only_there(adapter: Any) -> None:
    from matrix.explore.mutant import mutated_verdict, verdict

    data = yaml.safe_load(SCENARIO)
    mutant = _mutant("KVCacheManager.allocate_slots", "return-early")  # never allocates
    assert verdict(adapter, data)[:2] == (False, "finished")
    failed, kind, _ = mutated_verdict(adapter, data, mutant)
    assert failed and kind != "finished"
    assert verdict(adapter, data)[:2] == (False, "finished")  # this process: stock as before


@needs_vllm
def test_an_unknown_mutant_is_one_line_before_any_search(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explore", "--mutant", "Scheduler.nothing:1:negate", "--max-examples", "1"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("matrix explore --mutant: no mutant Scheduler.nothing:1:negate")
    assert len(error.splitlines()) == 1
