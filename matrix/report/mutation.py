"""The kill matrix of ``python -m matrix mutate`` as Markdown (the terminal shows the same text,
without the full matrix) and JSON: the scores per function, each suite's branch coverage of
the surface, the survivors with their diff, and every mutant with the item that killed it.
Pure but for writing the files.
"""

from __future__ import annotations

import json
from pathlib import Path

from matrix.mutate.results import (
    KILLED,
    SUITES,
    UNDECIDED,
    MutantRow,
    MutationReport,
    Score,
    by_function,
    score,
)

SUITE_WORDS = {"matrix": "the matrix", "upstream": "vLLM's tests"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or " "


def _score_row(name: str, counts: Score, suites: tuple[str, ...]) -> str:
    kills = [f"{getattr(counts, s)} ({counts.percent(s)})" if s in suites else "-" for s in SUITES]
    return (
        f"| {name} | {counts.generated} | {counts.equivalent} | {kills[0]} | {kills[1]} | "
        f"{counts.both} | {counts.matrix - counts.both} | {counts.upstream - counts.both} | "
        f"{counts.neither} | {counts.undecided} |"
    )


def score_table(report: MutationReport) -> list[str]:
    """Per function and in total: mutants, equivalent, killed by each suite, by both, by one
    alone, by neither, undecided."""
    suites = tuple(report.suites)
    lines = [
        "| function | mutants | equivalent | killed by the matrix | by vLLM's tests | both | "
        "matrix only | vLLM only | neither | undecided |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for function, rows in by_function(list(report.rows)).items():
        lines.append(_score_row(f"`{function}`", score(rows, suites), suites))
    lines.append(_score_row("**all**", score(list(report.rows), suites), suites))
    return lines


def coverage_table(report: MutationReport) -> list[str]:
    """Per function: its branches, those each suite reached, those one reached alone."""
    if not report.coverage:
        return []
    suites = [s for s in SUITES if s in report.suites]
    head = " | ".join(SUITE_WORDS[s] for s in suites)
    lines = [f"| function | branches | {head} | only the matrix | only vLLM's tests |"]
    lines.append("|---|---|" + "---|" * len(suites) + "---|---|")
    for entry in report.coverage:
        total = len(entry.branches)
        reached = " | ".join(f"{len(entry.reached.get(s, ()))}/{total}" for s in suites)
        only = [
            ", ".join(entry.only(a, b)) or "-" if {a, b} <= set(suites) else "-"
            for a, b in (("matrix", "upstream"), ("upstream", "matrix"))
        ]
        lines.append(f"| `{entry.function}` | {total} | {reached} | {only[0]} | {only[1]} |")
    return lines


def judged_suite(report: MutationReport) -> str:
    """Whose survivors the report lists: the matrix's, or the one suite that ran."""
    return "matrix" if "matrix" in report.suites else next(iter(report.suites), "matrix")


def survivors(report: MutationReport) -> list[MutantRow]:
    """The mutants the judged suite did not kill and nobody claims equivalent."""
    suite = judged_suite(report)
    return [r for r in report.rows if not r.equivalent and not r.killed_by(suite)]


def contradicted(report: MutationReport) -> list[MutantRow]:
    """Mutants claimed equivalent that a suite killed: the claim is wrong."""
    return [r for r in report.rows if r.equivalent and any(r.killed_by(s) for s in SUITES)]


def _ending(row: MutantRow, suite: str) -> str:
    ending = row.endings.get(suite)
    if ending is None:
        return "-"
    if ending.status == KILLED:
        return f"`{ending.killer}` ({ending.how})"
    if ending.status == UNDECIDED:
        return f"undecided ({ending.items_run} items, {ending.cpu:.0f} CPU-s)"
    return ending.status + (f": {ending.detail}" if ending.detail else "")


def survivor_lines(report: MutationReport) -> list[str]:
    """The survivors: id, diff, what each suite did with it, its gap."""
    left = survivors(report)
    if not left:
        return [f"Every counted mutant was killed by {SUITE_WORDS[judged_suite(report)]}."]
    untriaged = sum(1 for row in left if not row.gap)
    whose = SUITE_WORDS[judged_suite(report)]
    lines = [f"{len(left)} mutants survive {whose} ({untriaged} not triaged):", ""]
    lines += ["| mutant | diff | matrix | vLLM's tests | gap |", "|---|---|---|---|---|"]
    for row in left:
        lines.append(
            f"| `{row.id}` | `{_cell(row.diff)}` | {_ending(row, 'matrix')} | "
            f"{_ending(row, 'upstream')} | {_cell(row.gap) if row.gap else 'not triaged'} |"
        )
    return lines


def kill_matrix(report: MutationReport) -> list[str]:
    """Every mutant with the item that killed it in each suite."""
    suites = [s for s in SUITES if s in report.suites]
    lines = ["| mutant | " + " | ".join(SUITE_WORDS[s] for s in suites) + " |"]
    lines.append("|---|" + "---|" * len(suites))
    for row in report.rows:
        if row.equivalent:
            cells = [f"equivalent: {_cell(row.equivalent)}"] * len(suites)
        else:
            cells = [_ending(row, s) for s in suites]
        lines.append(f"| `{row.id}` | " + " | ".join(cells) + " |")
    return lines


def _suite_lines(report: MutationReport) -> list[str]:
    lines = []
    for name, info in report.suites.items():
        failing = (
            f", {len(info.failing)} not passing under stock (left out)" if info.failing else ""
        )
        lines.append(
            f"- {SUITE_WORDS[name]}: {info.items} items{failing}; {info.cpu:.0f} CPU-s "
            f"({info.baseline_cpu:.0f} for the run under coverage), {info.wall:.0f} s wall."
        )
    return lines


def report_lines(report: MutationReport, terminal: bool = False) -> list[str]:
    """The report; on the ``terminal`` without the full kill matrix."""
    shard = f", shard {report.shard}" if report.shard else ""
    lines = [f"# Mutation analysis of vLLM {report.vllm}'s reservation surface{shard}", ""]
    lines += [*_suite_lines(report), ""]
    if report.missing:
        lines += ["Not in this release: " + "; ".join(report.missing), ""]
    lines += ["## Mutants killed", "", *score_table(report), ""]
    if report.coverage:
        lines += ["## Branch coverage of the surface", "", *coverage_table(report), ""]
    lines += ["## Survivors", "", *survivor_lines(report), ""]
    wrong = contradicted(report)
    if wrong:
        lines += [f"Claimed equivalent but killed: {', '.join(r.id for r in wrong)}", ""]
    closed = [r.id for r in report.rows if r.gap and r.killed_by(judged_suite(report))]
    if closed:
        lines += [
            f"In a gap of the triage file but killed now (drop them from it): {', '.join(closed)}",
            "",
        ]
    if not terminal:
        lines += ["<details><summary>The kill matrix</summary>", "", *kill_matrix(report)]
        lines += ["", "</details>", ""]
    return lines


def write_report(report: MutationReport, out: Path) -> list[Path]:
    """Writes ``mutate-vllm-<version>[-shard-K-of-N].md`` and ``.json`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    stem = f"mutate-vllm-{report.vllm}"
    if report.shard:
        stem += "-shard-" + report.shard.replace("/", "-of-")
    markdown, data = out / f"{stem}.md", out / f"{stem}.json"
    markdown.write_text("\n".join(report_lines(report)) + "\n", encoding="utf-8")
    data.write_text(json.dumps(report.to_json(), indent=1) + "\n", encoding="utf-8")
    return [markdown, data]
