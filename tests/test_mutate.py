"""``python -m matrix mutate``'s parts that need no vLLM: the mutants made from a function's
syntax tree (paths, ids, regions), a method recompiled with its ``__class__`` cell and its line
numbers, the forked children's endings (kill, hang, crash, budget), the scores and the
equivalence file."""

from __future__ import annotations

import ast
import importlib
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from matrix.case.reading import CaseFileError
from matrix.mutate.child import Bounds
from matrix.mutate.forks import Job, Outcome, run_jobs
from matrix.mutate.generate import mutants_of, mutations
from matrix.mutate.install import install
from matrix.mutate.results import Ending, MutantRow, MutationReport, SuiteInfo, score
from matrix.mutate.surface import Region, Target, surface_for
from matrix.mutate.triage import load_triage
from matrix.report.mutation import report_lines, survivors

SOURCE = textwrap.dedent(
    """\
    import math


    class Base:
        def need(self, tokens: int) -> int:
            return tokens


    class Pool(Base):
        def need(self, tokens: int) -> int:
            '''Blocks for ``tokens``.'''
            logger.debug("asked %d", tokens)
            total = self.a + self.b + tokens
            if total > 0 and self.enabled:
                self.seen.append(total)
            return super().need(math.ceil(total / 4))

        def admit(self, request) -> bool:
            while request.waiting:
                if request.status == Status.LOADING:
                    request.ready = True
                self.lora = min(request.lora, 2)
            return False
    """
)
TARGET = Target("pool_module:Pool.need")


def test_mutant_ids_are_deterministic_and_say_where() -> None:
    first = mutants_of(TARGET, SOURCE)
    assert [m.id for m in first] == [m.id for m in mutants_of(TARGET, SOURCE)]
    assert len({m.id for m in first}) == len(first)
    assert "Pool.need:12:return-0" in {m.id for m in first}  # returns before its first line
    assert all(m.id.startswith("Pool.need:") for m in first)


def test_nested_sums_are_told_apart_by_path() -> None:
    # `self.a + self.b + tokens` and its inner `self.a + self.b` start at one line and column;
    # their paths differ, so each gives its own drops, none twice.
    drops = [m for m in mutants_of(TARGET, SOURCE) if m.operator.startswith("drop")]
    diffs = [m.diff for m in drops]
    assert len(diffs) == len(set(diffs)) == 4
    assert len({m.path for m in drops}) == 2


def test_logging_and_assertions_are_never_mutated() -> None:
    changed = [m for m in mutants_of(TARGET, SOURCE) if m.operator != "return-0"]
    assert not [m for m in changed if "logger" in m.diff]


def test_a_region_mutates_only_its_landmarked_block_less_other_features() -> None:
    region = Region("LOADING", take="branch", other_features=("lora",))
    found = mutants_of(Target("pool_module:Pool.admit", region), SOURCE)
    lines = {m.line for m in found}
    assert lines == {20, 21}  # the branch's test and body; not the loop, not the lora line
    assert {m.operator for m in found} >= {"negate", "eq-to-ne", "delete", "flip"}


def test_no_two_mutants_make_the_same_function() -> None:
    made = [ast.unparse(m.changed()) for m in mutations(TARGET, SOURCE)]
    assert len(made) == len(set(made))


@pytest.fixture
def pool_module(tmp_path: Path) -> Iterator[object]:
    (tmp_path / "pool_module.py").write_text(SOURCE.replace("logger.debug", "print"))
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module("pool_module")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("pool_module", None)


class _Pool:
    a, b, enabled = 1, 2, True

    def __init__(self) -> None:
        self.seen: list[int] = []


def test_an_installed_mutant_keeps_its_lines_and_zero_argument_super(
    pool_module: object,
) -> None:
    source = SOURCE.replace("logger.debug", "print")
    pool = pool_module.Pool  # type: ignore[attr-defined]
    instance = pool.__new__(pool)
    instance.__dict__.update(_Pool().__dict__, a=1, b=2, enabled=True)
    assert instance.need(5) == 2
    chosen = {m.mutant.id: m for m in mutations(TARGET, source)}["Pool.need:16:minus1"]
    install("pool_module:Pool.need", chosen.changed(in_place=True))
    assert instance.need(5) == 3  # math.ceil(8 / 3), through Base.need by super()
    assert pool.need.__code__.co_firstlineno == 10
    assert pool.need.__qualname__ == "Pool.need"


def _jobs(*names: str) -> list[Job]:
    return [Job(name, lambda: None, (0, 1, 2)) for name in names]


def _ran(behaviour: dict[str, object]) -> dict[str, Outcome]:
    """Runs one job per behaviour in forked children; item 1 behaves as named."""
    current: dict[str, str] = {}
    outcomes: dict[str, Outcome] = {}

    def install_for(name: str) -> object:
        return lambda: current.update(name=name)

    def run_item(index: int, following: int | None) -> bool:
        kind = behaviour[current["name"]]
        if index != 1 or kind == "pass":
            return True
        if kind == "fail":
            return False
        if kind == "crash":
            import os

            os._exit(3)
        while True:  # "loop": only the CPU bound ends it
            pass

    jobs = [Job(name, install_for(name), (0, 1, 2)) for name in behaviour]  # type: ignore[arg-type]
    bounds = Bounds(floor=0.5, factor=1.0, budget=60.0)
    run_jobs(
        jobs,
        lambda job: list(job.covering),
        [0.0, 0.0, 0.0],
        run_item,
        bounds,
        2,
        lambda o: outcomes.update({o.mutant: o}),
    )
    return outcomes


def test_children_end_as_killed_survived_hang_or_crash() -> None:
    ended = _ran({"a": "fail", "b": "pass", "c": "loop", "d": "crash"})
    assert (ended["a"].status, ended["a"].killer, ended["a"].how) == ("killed", 1, "failed")
    assert (ended["b"].status, ended["b"].items_run) == ("survived", 3)
    assert (ended["c"].status, ended["c"].how) == ("killed", "hang")
    assert (ended["d"].status, ended["d"].how) == ("killed", "crash")


def test_a_child_past_its_budget_is_undecided_not_a_survivor() -> None:
    outcomes: list[Outcome] = []

    def slow(index: int, following: int | None) -> bool:
        end = __import__("time").process_time() + 0.3
        while __import__("time").process_time() < end:
            pass
        return True

    run_jobs(
        _jobs("x"),
        lambda job: list(job.covering),
        [0.0] * 3,
        slow,
        Bounds(floor=5, factor=1, budget=0.5),
        1,
        outcomes.append,
    )
    assert (outcomes[0].status, outcomes[0].how) == ("undecided", "budget")
    assert outcomes[0].items_run == 2


def _row(name: str, matrix: str, upstream: str, equivalent: str = "") -> MutantRow:
    return MutantRow(
        name,
        "f",
        f"1: a -> {name}",
        equivalent,
        {
            "matrix": Ending(matrix, "cell" if matrix == "killed" else ""),
            "upstream": Ending(upstream, "test" if upstream == "killed" else ""),
        },
    )


def test_scores_count_equivalents_apart() -> None:
    rows = [
        _row("a", "killed", "killed"),
        _row("b", "killed", "survived"),
        _row("c", "survived", "killed"),
        _row("d", "survived", "undecided"),
        _row("e", "survived", "survived", equivalent="the watermark is 0 by construction"),
    ]
    counts = score(rows, ("matrix", "upstream"))
    assert (counts.generated, counts.equivalent, counts.matrix, counts.upstream) == (5, 1, 2, 2)
    assert (counts.both, counts.neither, counts.undecided) == (1, 1, 1)
    assert counts.percent("matrix") == "50%"


def test_the_report_lists_survivors_and_reads_back_from_json() -> None:
    rows = (_row("a", "killed", "killed"), _row("b", "survived", "killed"))
    report = MutationReport("0.34.0", rows, {"matrix": SuiteInfo(3, (), 1.0, 2.0, 0.5)})
    assert [r.id for r in survivors(report)] == ["b"]
    text = "\n".join(report_lines(report))
    assert "| **all** | 2 | 0 | 1 (50%)" in text and "`b`" in text
    assert MutationReport.from_json(report.to_json()) == report


def test_an_equivalence_claim_names_a_mutant_of_this_release(tmp_path: Path) -> None:
    found = mutants_of(TARGET, SOURCE)
    claim = tmp_path / "vllm-x.yaml"
    claim.write_text(
        "release: x\nequivalent:\n"
        f"  - mutant: {found[0].id}\n    diff: {json.dumps(found[0].diff)}\n"
        "    reason: the function is never reached with these values\n"
    )
    assert load_triage(claim, found).equivalent == {
        found[0].id: "the function is never reached with these values"
    }
    claim.write_text(claim.read_text().replace(found[0].id, "Pool.need:99:negate"))
    with pytest.raises(CaseFileError, match=r"vllm-x.yaml:3: equivalent.0.mutant: no such mutant"):
        load_triage(claim, found)


def test_each_release_from_0_33_has_a_surface() -> None:
    assert surface_for("0.31.0") == ()
    assert len(surface_for("0.33.0")) < len(surface_for("0.34.0"))
    assert surface_for("0.35.0") == surface_for("0.34.0")


def test_a_gap_names_survivors_of_this_release_once(tmp_path: Path) -> None:
    found = mutants_of(TARGET, SOURCE)
    triage = tmp_path / "vllm-x.yaml"
    triage.write_text(
        "release: x\ngaps:\n"
        "  - behaviour: a pool where only the sum's last term matters\n"
        "    needs: a case whose pool sits one block above the fit\n"
        f"    mutants: [{found[1].id}, {found[2].id}]\n"
    )
    gaps = load_triage(triage, found).gaps
    assert set(gaps) == {found[1].id, found[2].id}
    assert gaps[found[1].id].startswith("a pool where only")
    triage.write_text(triage.read_text().replace(found[2].id, found[1].id))
    with pytest.raises(CaseFileError, match=r"vllm-x.yaml:5: gaps.0.mutants.1: triaged twice"):
        load_triage(triage, found)
