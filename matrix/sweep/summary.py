"""What a sweep prints: the outcomes counted, the layout classes with their architectures, the
reasons, the difference from the baseline, and the cross-release view of the committed
baselines (an architecture's class on each release). Pure: rows in, lines out.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from matrix.case.baselines import STATUS_WORDS, STATUSES, Change, Row
from matrix.case.layout_class import class_slug


def counts_line(rows: Sequence[Row]) -> str:
    """``274 architectures: 146 layout, 70 unmapped, ...`` in the statuses' order."""
    counted = Counter(row.status for row in rows)
    parts = [f"{counted[status]} {status}" for status in STATUSES if counted[status]]
    return f"{len(rows)} architectures: {', '.join(parts)}"


def classes(rows: Sequence[Row]) -> dict[str, list[str]]:
    """Each layout class -> its architectures, largest class first."""
    found: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        if row.status == "layout":
            found[row.detail].append(row.architecture)
    return dict(sorted(found.items(), key=lambda item: (-len(item[1]), item[0])))


def summary_lines(rows: Sequence[Row], names: int = 4) -> list[str]:
    """The sweep's outcome: the counts, each class with its size and first ``names``
    architectures, each reason with its architectures."""
    lines = [counts_line(rows), "", f"{len(classes(rows))} layout classes:"]
    for key, members in classes(rows).items():
        shown = ", ".join(members[:names]) + (", ..." if len(members) > names else "")
        lines.append(f"  {len(members):4d}  {class_slug(key)}  {key}  ({shown})")
    for status in STATUSES[1:]:
        reasons: dict[str, list[str]] = defaultdict(list)
        for row in rows:
            if row.status == status:
                reasons[row.detail].append(row.architecture)
        if not reasons:
            continue
        lines += ["", f"{status} ({STATUS_WORDS[status]}):"]
        for reason, members in sorted(reasons.items(), key=lambda item: (-len(item[1]), item)):
            lines.append(f"  {len(members):4d}  {reason}: {', '.join(members)}")
    return lines


def change_lines(found: Sequence[Change], version: str) -> list[str]:
    """The difference from the release's baseline, an architecture a line."""
    if not found:
        return [f"sweep: every architecture as the vLLM {version} baseline has it"]
    return [
        f"sweep: {len(found)} architectures differ from the vLLM {version} baseline:",
        *(f"  {change.line()}" for change in found),
    ]


def cross_release_lines(baselines: Mapping[str, Sequence[Row]]) -> list[str]:
    """Each architecture's class (its slug) or outcome on each release with a baseline, a line
    an architecture; ``-`` where a release's registry lacks it."""
    versions = list(baselines)
    by_release = {v: {row.architecture: row for row in rows} for v, rows in baselines.items()}
    names = sorted({name for rows in by_release.values() for name in rows})

    def cell(row: Row | None) -> str:
        if row is None:
            return "-"
        return class_slug(row.detail) if row.status == "layout" else row.status

    table = [["architecture", *versions]]
    table += [[name, *(cell(by_release[v].get(name)) for v in versions)] for name in names]
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    return [
        "  ".join(text.ljust(w) for text, w in zip(line, widths, strict=True)).rstrip()
        for line in table
    ]
