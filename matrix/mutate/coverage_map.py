"""Which items of a suite reach which lines of the surface's files, and which branches the
suite reaches: one run of every item under coverage.py (branch mode, a dynamic context per
item), in a forked child, kept per release and per digest of what it depends on.

The same run decides which items a mutant runs against (those reaching its lines) and gives
each suite's branch coverage; it records every item's outcome under stock (an item that does
not pass there cannot kill) and its CPU time (cheap items run first).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from matrix.mutate.child import cpu_seconds, keep_frozen

FORMAT = 4  # of the cached file; a change makes every cache miss
# An item that runs this long under stock (CPU seconds) is cut short and left out: no mutant
# can be judged against it within any budget.
ITEM_BOUND_S = 300.0


@dataclass(frozen=True)
class Baseline:
    """Every item's stock outcome and CPU time, the lines it reached (per file relative to
    vLLM's package's parent), and the arcs the suite reached (per file, as measured)."""

    items: tuple[str, ...]
    passed: tuple[bool, ...]
    cpu: tuple[float, ...]
    lines: dict[str, dict[int, tuple[int, ...]]]
    arcs: dict[str, tuple[tuple[int, int], ...]]
    # Modules the items imported on their way (connectors, model files): the parent imports
    # them before forking, so no mutant's child pays for them.
    modules: tuple[str, ...] = ()
    # The lines the warm-up reached, per file: the parent warms only when none is mutated.
    warm_lines: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def covering(self, file: str, first: int, last: int) -> set[int]:
        """The items that passed under stock and reached a line from ``first`` to ``last``."""
        reached = self.lines.get(file, {})
        found = {i for line in range(first, last + 1) for i in reached.get(line, ())}
        return {i for i in found if self.passed[i]}

    def to_json(self) -> dict[str, Any]:
        """As the cache holds it."""
        return {
            "format": FORMAT,
            "items": list(self.items),
            "passed": list(self.passed),
            "cpu": [round(c, 4) for c in self.cpu],
            "lines": {
                file: {str(line): list(items) for line, items in sorted(by_line.items())}
                for file, by_line in self.lines.items()
            },
            "arcs": {file: [list(arc) for arc in arcs] for file, arcs in self.arcs.items()},
            "modules": list(self.modules),
            "warm_lines": {file: list(lines) for file, lines in self.warm_lines.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Baseline:
        """Read back from :meth:`to_json`."""
        return cls(
            tuple(data["items"]),
            tuple(bool(p) for p in data["passed"]),
            tuple(float(c) for c in data["cpu"]),
            {
                file: {int(line): tuple(items) for line, items in by_line.items()}
                for file, by_line in data["lines"].items()
            },
            {file: tuple((a, b) for a, b in arcs) for file, arcs in data["arcs"].items()},
            tuple(data["modules"]),
            {file: tuple(lines) for file, lines in data["warm_lines"].items()},
        )


class ItemPastBound(Exception):
    """An item ran past :data:`ITEM_BOUND_S` of CPU under stock."""


def _past_bound(signum: int, frame: FrameType | None) -> None:
    raise ItemPastBound(f"past {ITEM_BOUND_S:.0f} CPU-s under stock")


def cache_key(*parts: str) -> str:
    """The digest a cached baseline is filed under."""
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def load_cached(path: Path) -> Baseline | None:
    """The cached baseline at ``path``, or None (absent, unreadable or another format)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Baseline.from_json(data) if data.get("format") == FORMAT else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(path: Path, baseline: Baseline) -> None:
    """Writes the baseline atomically (a concurrent reader sees the old file or the new)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, scratch = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump(baseline.to_json(), out)
    os.replace(scratch, path)


def measure(
    items: Sequence[str],
    files: dict[str, Path],
    run_item: Callable[[int, int | None], bool],
    warm: Callable[[], None],
) -> Baseline:
    """Runs ``warm``, then every item once, under coverage in a forked child; ``files`` maps
    each surface file's relative name to where it is installed."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "baseline.json"
        # As for the mutants' children: a collection (vLLM's tests run one after each test)
        # then walks the child's own objects, not the whole imported vLLM and torch.
        gc.collect()
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                keep_frozen()
                store(out, _measured(items, files, run_item, warm))
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        gc.unfreeze()
        baseline = load_cached(out)
        if baseline is None:
            raise RuntimeError(f"the baseline run ended with {os.waitstatus_to_exitcode(status)}")
        return baseline


def _measured(
    items: Sequence[str],
    files: dict[str, Path],
    run_item: Callable[[int, int | None], bool],
    warm: Callable[[], None],
) -> Baseline:
    import coverage

    where = {str(path): name for name, path in files.items()}
    tracer = coverage.Coverage(data_file=None, branch=True, include=list(where), config_file=False)
    passed: list[bool] = []
    cpu: list[float] = []
    imported = set(sys.modules)
    tracer.start()
    signal.signal(signal.SIGPROF, _past_bound)
    try:
        tracer.switch_context("warm")
        warm()
        for index in range(len(items)):
            tracer.switch_context(str(index))
            before = cpu_seconds()
            following = index + 1 if index + 1 < len(items) else None
            signal.setitimer(signal.ITIMER_PROF, ITEM_BOUND_S)
            try:
                passed.append(run_item(index, following))
            except ItemPastBound:  # raised outside the test's own handling: it does not pass
                passed.append(False)
            signal.setitimer(signal.ITIMER_PROF, 0)
            cpu.append(cpu_seconds() - before)
    finally:
        tracer.stop()
    data = tracer.get_data()
    lines: dict[str, dict[int, tuple[int, ...]]] = {}
    arcs: dict[str, tuple[tuple[int, int], ...]] = {}
    warm_lines: dict[str, tuple[int, ...]] = {}
    for measured in data.measured_files():
        name = where.get(measured)
        if name is None:
            continue
        by_line = data.contexts_by_lineno(measured).items()
        warm_lines[name] = tuple(sorted(line for line, c in by_line if "warm" in c))
        lines[name] = {
            line: tuple(sorted(int(c) for c in contexts if c.isdigit()))
            for line, contexts in by_line
        }
        arcs[name] = tuple(sorted(data.arcs(measured) or ()))
    modules = tuple(sorted(set(sys.modules) - imported))
    return Baseline(tuple(items), tuple(passed), tuple(cpu), lines, arcs, modules, warm_lines)
