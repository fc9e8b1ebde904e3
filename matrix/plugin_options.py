"""The matrix's pytest command-line options and its ``matrix_cases`` ini setting (the plugin's
``pytest_addoption``); what each does is in its help."""

from __future__ import annotations

import pytest

from matrix.case.selection import FILTER_OPTIONS
from matrix.case.shipped import SUITES
from matrix.report.files import FULL_TERMINAL


def add_options(parser: pytest.Parser) -> None:
    """Adds the matrix's command-line options and its ``matrix_cases`` ini setting."""
    group = parser.getgroup("matrix", "vLLM KV reservation matrix")
    group.addoption(
        "--matrix-report",
        action="append",
        default=[],
        metavar="PATH",
        help="write the results as Markdown (.md), JSON (.json) or a self-contained HTML page "
        "(.html); pictures go in a folder beside the .md; repeatable",
    )
    group.addoption(
        "--matrix-gpus",
        default=None,
        metavar="IDS",
        help="comma-separated GPU ids; each xdist worker is pinned to one of them "
        "(default: CUDA_VISIBLE_DEVICES when it lists several)",
    )
    group.addoption(
        "--matrix-variant",
        action="append",
        default=[],
        metavar="MODULE:NAME",
        help="also run a reservation variant of your own: package.module:NAME or "
        "path/to/file.py:NAME (docs/variants.md); repeatable",
    )
    group.addoption(
        "--matrix-no-tables",
        action="store_true",
        default=False,
        help="write the --matrix-report files but print no tables (a forked worker's run)",
    )
    group.addoption(
        FULL_TERMINAL,
        action="store_true",
        default=False,
        help="print every table in the terminal (by default, with a Markdown or HTML report "
        "written, the headline's tables and the cells against their case, the rest in the files)",
    )
    group.addoption(
        "--matrix-worker",
        default=None,
        metavar="W/M",
        help="run worker W's share of M of this run's (or shard's) files: python -m matrix run "
        "gives each forked worker one",
    )
    group.addoption(
        "--matrix-draw-ahead",
        action="store_true",
        default=False,
        help="draw this process's cells' pictures into the picture store at its end (python "
        "-m matrix run's forked workers, for the report their parent writes)",
    )
    group.addoption(
        "--matrix-suite",
        default="",
        choices=SUITES,
        help="the suite the cases are (python -m matrix connectors, sweep --cells): its shard "
        "reports say so, and the merge names their report after it",
    )
    group.addoption(
        "--matrix-may-be-empty",
        action="store_true",
        default=False,
        help="a selection with no cells here is an empty run, not pytest's no-tests failure "
        "(exit 5): the CI player gives a filter to every suite's run (a CI shard's empty "
        "selection is always an empty shard; the merge fails when every shard is empty)",
    )
    for name, what in FILTER_OPTIONS:
        group.addoption(
            f"--matrix-{name}",
            action="append",
            default=[],
            metavar="NAME",
            help=f"run only the cells {what}; repeatable (any of them)",
        )
    group.addoption(
        "--matrix-cases",
        action="store_true",
        default=False,
        help="run the shipped cases (from the installed package), beside any paths given",
    )
    parser.addini(
        "matrix_cases",
        type="paths",
        default=[],
        help="directories whose *.yaml files are matrix cases",
    )
