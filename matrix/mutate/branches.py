"""Each surface function's branches and which of them a suite reached, from the arcs its
baseline measured: coverage.py's own analysis of the source (its arcs, mapped to the first
line of each statement), restricted to the function's mutated statements.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

from matrix.mutate.generate import SurfaceError, find_function, module_file
from matrix.mutate.regions import RegionNotFound, mutable_statements, surface_lines
from matrix.mutate.results import BranchCoverage
from matrix.mutate.surface import Target

Arc = tuple[int, int]


def _arc(arc: Arc) -> str:
    return f"{arc[0]}->{arc[1]}"


def branch_coverage(
    targets: tuple[Target, ...], root: Path, arcs: Mapping[str, Mapping[str, list[Arc]]]
) -> tuple[BranchCoverage, ...]:
    """Per target, its branches and those each suite (``arcs``: suite -> file -> measured
    arcs) reached."""
    import coverage
    from coverage.python import PythonFileReporter

    tracer = coverage.Coverage(config_file=False, branch=True, data_file=None)
    found: list[BranchCoverage] = []
    reporters: dict[str, PythonFileReporter] = {}
    for target in targets:
        file = module_file(target.module)
        path = root / file
        try:
            function = find_function(ast.parse(path.read_text("utf-8")), target.qualname)
            lines = surface_lines(function, mutable_statements(function, target.region))
        except (OSError, SyntaxError, RegionNotFound, SurfaceError):
            continue  # the report lists a target the release lacks apart
        reporter = reporters.setdefault(file, PythonFileReporter(str(path), tracer))
        exits = reporter.exit_counts()
        possible = sorted(a for a in reporter.arcs() if a[0] in lines and exits.get(a[0], 0) > 1)
        reached: dict[str, tuple[str, ...]] = {}
        for suite, by_file in arcs.items():
            measured = reporter.translate_arcs(by_file.get(file, []))
            reached[suite] = tuple(_arc(a) for a in possible if a in measured)
        found.append(BranchCoverage(target.qualname, tuple(_arc(a) for a in possible), reached))
    return tuple(found)
