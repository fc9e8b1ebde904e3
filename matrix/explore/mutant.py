"""``python -m matrix explore --mutant ID``: a drawn scenario under stock and under a mutant of
the reservation surface (``python -m matrix mutate --list``), the two verdicts compared.

The mutant runs in a child forked for the scenario (installing it changes vLLM's class for
good), under a bound on the child's CPU time: a scenario the mutant makes loop is a difference
too. A scenario whose verdict differs is a finding; Hypothesis shrinks it like any other, and
its case file holds stock to what stock did (``variants: [stock]``, and ``expect`` when stock
itself fails), so ``python -m matrix run`` kills the mutant with it.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Callable
from dataclasses import asdict, replace
from types import FrameType
from typing import Any

from matrix.adapters.protocol import VersionAdapter
from matrix.explore.strategies import Draw
from matrix.explore.trials import Trial, measured_fit, trial, validated
from matrix.judge.runs import classify_run
from matrix.judge.verdict import judge_cell
from matrix.run.pools import run_pool

CPU_BOUND_S = 60.0  # a scenario is a few scheduler runs: far below this unless the mutant loops
HANG = 86


class UnknownMutant(Exception):
    """The id names no mutant of the installed release's surface."""


def check_mutant(mutant: str) -> None:
    """Raises :class:`UnknownMutant` unless ``mutant`` is one of the installed release's."""
    from matrix.installed import installed_vllm_version
    from matrix.mutate.generate import surface_mutants, vllm_root
    from matrix.mutate.surface import surface_for

    mutants, _ = surface_mutants(surface_for(installed_vllm_version() or ""), vllm_root())
    if mutant not in {m.id for m in mutants}:
        raise UnknownMutant(f"no mutant {mutant} in this release (python -m matrix mutate --list)")


def _install(mutant: str) -> None:
    from matrix.installed import installed_vllm_version
    from matrix.mutate.generate import mutations, vllm_root
    from matrix.mutate.install import install
    from matrix.mutate.surface import surface_for

    root = vllm_root()
    for target in surface_for(installed_vllm_version() or ""):
        if not mutant.startswith(target.qualname + ":"):
            continue
        source = (root / target.module.replace(".", "/")).with_suffix(".py").read_text("utf-8")
        for mutation in mutations(target, source):
            if mutation.mutant.id == mutant:
                install(mutation.mutant.target, mutation.changed(in_place=True))
                return
    raise UnknownMutant(mutant)


Verdict = tuple[bool, str, str]  # failed, kind, detail


def verdict(adapter: VersionAdapter, data: dict[str, Any]) -> Verdict:
    """A written scenario (its pools fixed) judged as its cell is: the fit measured on the
    installed code, each pool run under stock."""
    case = adapter.resolve(validated(data))
    fit = measured_fit(adapter, case)
    pool = data["pool"]
    start, stop = (pool, pool) if isinstance(pool, int) else (pool["start"], pool["stop"])
    runs = [classify_run(run_pool(adapter, case, "stock", p)) for p in range(start, stop + 1)]
    judged = judge_cell(runs, fit, case.fit_slack)
    return judged.observed == "fail", judged.kind, judged.detail


def in_child(work: Callable[[], Any], bound: float = CPU_BOUND_S) -> Any:
    """``work()``'s JSON result, computed in a forked child: this process runs no scheduler for
    it, so nothing it learns (a case's fit, a tier's contents) outlives it, and a mutant it
    installs dies with it. A child past ``bound`` CPU-s raises :class:`ChildHung`; one that
    raised, :class:`ChildFailed` with its error."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:

            def hang(signum: int, frame: FrameType | None) -> None:
                os._exit(HANG)

            signal.signal(signal.SIGPROF, hang)
            signal.setitimer(signal.ITIMER_PROF, bound)
            os.write(write, json.dumps({"result": work()}).encode())
        except BaseException as error:
            os.write(write, json.dumps({"error": f"{type(error).__name__}: {error}"}).encode())
        finally:
            os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 1 << 16):
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == HANG:
        raise ChildHung(f"past {bound:.0f} CPU-s")
    if not chunks:
        raise ChildFailed(f"the child ended with {os.waitstatus_to_exitcode(status)}")
    answer = json.loads(b"".join(chunks))
    if "error" in answer:
        raise ChildFailed(answer["error"])
    return answer["result"]


class ChildHung(Exception):
    """A child ran past its CPU bound."""


class ChildFailed(Exception):
    """A child raised, or died, before its answer."""


def mutated_verdict(adapter: VersionAdapter, data: dict[str, Any], mutant: str) -> Verdict:
    """:func:`verdict` with the mutant installed, in a forked child; a child past its CPU
    bound is a hang, one that raised an error."""

    def work() -> Verdict:
        _install(mutant)
        return verdict(adapter, data)

    try:
        failed, kind, detail = in_child(work)
    except ChildHung as hung:
        return True, "hang", str(hung)
    except ChildFailed as error:
        return True, "error", str(error)
    return bool(failed), str(kind), str(detail)


def difference(
    adapter: VersionAdapter, draw: Draw, mutant: str, slack: int | None, deployable: bool
) -> Trial | None:
    """The scenario as a finding when the mutant changes its verdict (``failed`` True), or
    as it is under stock (``failed`` False); None when the release cannot run it."""

    def under_stock() -> tuple[dict[str, Any], Verdict] | None:
        drawn = trial(adapter, draw, "stock", slack, False, deployable)
        return None if drawn is None else (asdict(drawn), verdict(adapter, drawn.data))

    try:
        found = in_child(under_stock)
    except (ChildHung, ChildFailed):  # a scenario stock cannot run says nothing of the mutant
        return None
    if found is None:
        return None
    stock, before = Trial(**found[0]), tuple(found[1])
    after = mutated_verdict(adapter, stock.data, mutant)
    if after[:2] == before[:2]:
        return replace(stock, failed=False)
    expect = {"expect": {"stock": before[1]}} if before[0] else {}
    detail = f"stock: {before[1]}; mutant {mutant}: {after[1]} ({after[2]})"
    return Trial(
        "stock",
        {**stock.data, **expect},
        True,
        after[1],
        detail,
        "",
        prefix="mutant_" + re.sub(r"[^A-Za-z0-9]+", "_", mutant).strip("_").lower(),
    )
