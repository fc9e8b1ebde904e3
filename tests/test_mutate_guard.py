"""CI's guard on ``python -m matrix mutate``: a fixed handful of the installed release's mutants
of its reservation surface, each installed in a child forked from this test process, against
the shipped cells that killed it in a full run (``reports/mutate-vllm-<version>.json``): they
must still kill it, and a mutant the triage file claims equivalent must survive every one of
them. A few seconds; the full run is ``tox -e mutate034`` (docs/mutate.md)."""

from __future__ import annotations

from typing import Any

import pytest

from matrix.case.expansion import Cell, cells_from_file
from matrix.mutate.child import Bounds
from matrix.mutate.forks import Job, Outcome, run_jobs
from tests.helpers import CASES, needs_vllm

# Per release: (mutant, the case file and the cell that killed it in a full run).
KILLED = {
    "0.33": (
        (
            "Scheduler._inflight_prefill_reserved_blocks:3434:return-plus1",
            "model_deepseek-v3.yaml",
            "deepseek-v3[run=eagle7-aligned]-stock",
        ),
        (
            "KVCacheManager.allocate_slots:513:min-to-max",
            "model_deepseek-v3.yaml",
            "deepseek-v3[run=eagle7-aligned]-stock",
        ),
        (
            "MambaManager.get_num_blocks_to_allocate:1717:delete",
            "model_falcon-h1.yaml",
            "falcon-h1[run=none-eagle1-past]-stock",
        ),
    ),
    "0.34": (
        (
            "Scheduler._inflight_prefill_reserved_blocks:3568:return-plus1",
            "model_mistral-7b.yaml",
            "mistral-7b[spec=k0,prompt=past]-stock",
        ),
        (
            "KVCacheManager.allocate_slots:554:min-to-max",
            "model_mistral-7b.yaml",
            "mistral-7b[spec=k0,prompt=past]-stock",
        ),
        (
            "MambaManager.get_num_blocks_to_allocate:1794:delete",
            "model_falcon-h1.yaml",
            "falcon-h1[run=align-ngram1-short]-stock",
        ),
    ),
}
# Per release: a mutant the triage file claims equivalent, a sibling on its line that is not
# (so the cell is seen to reach the line), and the cell that kills the sibling.
EQUIVALENT: dict[str, tuple[str, str, tuple[str, str]]] = {
    "0.33": (
        "MambaManager.get_num_blocks_to_allocate:1785:gt-to-ge",
        "MambaManager.get_num_blocks_to_allocate:1785:gt-to-le",
        ("mamba_align.yaml", "mamba_align[k=3]-stock"),
    ),
    "0.34": (
        "MambaManager.get_num_blocks_to_allocate:1790:gt-to-ge",
        "MambaManager.get_num_blocks_to_allocate:1790:gt-to-le",
        ("model_falcon-h1.yaml", "falcon-h1[run=align-eagle7-past]-stock"),
    ),
}


def _cells(wanted: list[tuple[str, str]]) -> list[Cell]:
    from matrix.installed import expected_stock

    found = []
    for file, test_id in wanted:
        cells = cells_from_file(CASES / file, expected_stock())
        by_id = {cell.test_id: cell for cell in cells}
        assert test_id in by_id, f"{file}: no cell {test_id}"
        found.append(by_id[test_id])
    return found


def _run(adapter: Any, mutant: str, cells: list[Cell]) -> Outcome:
    from matrix.installed import installed_vllm_version
    from matrix.judge.result import result_of
    from matrix.judge.verdict import judge_run
    from matrix.mutate.generate import mutations, vllm_root
    from matrix.mutate.install import install
    from matrix.mutate.surface import surface_for
    from matrix.run.cell import run_cell

    chosen = None
    for target in surface_for(installed_vllm_version() or ""):
        if mutant.startswith(target.qualname + ":"):
            source = (vllm_root() / target.module.replace(".", "/")).with_suffix(".py")
            made = {m.mutant.id: m for m in mutations(target, source.read_text("utf-8"))}
            chosen = made.get(mutant)
    assert chosen is not None, f"{mutant}: not a mutant of this release (matrix mutate --list)"

    def run_item(index: int, following: int | None) -> bool:
        cell = cells[index]
        return result_of(cell, judge_run(run_cell(adapter, cell))).as_expected

    def installing() -> None:
        install(chosen.mutant.target, chosen.changed(in_place=True))

    ended: list[Outcome] = []
    job = Job(mutant, installing, tuple(range(len(cells))))
    run_jobs(
        [job], lambda j: list(j.covering), [0.0] * len(cells), run_item, Bounds(), 1, ended.append
    )
    return ended[0]


def _release() -> str:
    from matrix.installed import installed_vllm_version
    from matrix.releases import release_of

    return release_of(installed_vllm_version() or "")


@needs_vllm
def test_known_mutants_are_killed_by_their_cells(adapter: Any) -> None:
    guard = KILLED.get(_release())
    if not guard:
        pytest.skip(f"no guarded mutants on vLLM {_release()}")
    for mutant, file, test_id in guard:
        ended = _run(adapter, mutant, _cells([(file, test_id)]))
        assert ended.status == "killed", f"{mutant}: {ended}"


@needs_vllm
def test_a_mutant_claimed_equivalent_survives_where_its_sibling_dies(adapter: Any) -> None:
    if _release() not in EQUIVALENT:
        pytest.skip(f"no guarded equivalent mutant on vLLM {_release()}")
    mutant, sibling, wanted = EQUIVALENT[_release()]
    from matrix.installed import installed_vllm_version
    from matrix.mutate.generate import surface_mutants, vllm_root
    from matrix.mutate.surface import surface_for
    from matrix.mutate.triage import load_triage, triage_path

    version = installed_vllm_version() or ""
    mutants, _ = surface_mutants(surface_for(version), vllm_root())
    assert mutant in load_triage(triage_path(version), mutants).equivalent
    cells = _cells([wanted])
    assert _run(adapter, sibling, cells).status == "killed"  # the cell reaches the line
    ended = _run(adapter, mutant, cells)
    assert ended.status == "survived", f"{mutant}: {ended}"
