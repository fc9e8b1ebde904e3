"""The Markdown of ``python -m matrix upstream``: a run against its release's expected outcomes,
and the tests a variant changes against stock. The terminal shows the same text. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from matrix.upstream.expected import Change, Comparison, Result

OUTCOME_COLUMNS = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


@dataclass(frozen=True)
class RunInfo:
    """What a run was: the release, the tier, where the tests came from, how long it took."""

    version: str
    tier: str
    source: Mapping[str, str]
    wall_s: float
    workers: str


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or " "


def _source(info: RunInfo) -> str:
    source = info.source
    if "checkout" in source:
        return f"the checkout {source['checkout']}"
    return f"{source['filename']} (sha256 {source['sha256']})"


def stock_report(info: RunInfo, comparison: Comparison) -> list[str]:
    """A stock run: counts, the listed tests by need, and whatever breaks the expectation."""
    counts = comparison.counts()
    lines = [
        f"# vLLM {info.version}'s own tests, tier `{info.tier}`: "
        f"{'as expected' if comparison.ok else 'NOT as expected'}",
        "",
        f"Tests from {_source(info)}; {info.workers} pytest worker(s); wall time "
        f"{info.wall_s:.0f} s.",
        "",
        "| " + " | ".join(OUTCOME_COLUMNS) + " |",
        "|" + "---|" * len(OUTCOME_COLUMNS),
        "| " + " | ".join(str(counts[c]) for c in OUTCOME_COLUMNS) + " |",
        "",
    ]
    by_need = comparison.by_need()
    if by_need:
        lines += ["Listed (known not to pass here), by what they need:", ""]
        lines += ["| needs | outcome | tests |", "|---|---|---|"]
        lines += [f"| {need} | {outcome} | {n} |" for (need, outcome), n in sorted(by_need.items())]
        lines.append("")
    if comparison.unexpected:
        lines += [f"Not listed, did not pass ({len(comparison.unexpected)}):", ""]
        lines += ["| test | outcome | message |", "|---|---|---|"]
        lines += [
            f"| `{r.nodeid}` | {r.outcome} | {_cell(r.message)} |" for r in comparison.unexpected
        ]
        lines.append("")
    if comparison.stale:
        lines += [f"Listed, but did not end as listed ({len(comparison.stale)}):", ""]
        lines += ["| entry | listed | now |", "|---|---|---|"]
        for stale in comparison.stale:
            now = ", ".join(f"`{r.nodeid}` {r.outcome}" for r in stale.results) or "not run"
            lines.append(f"| `{stale.known.test}` | {stale.known.outcome} | {_cell(now)} |")
        lines.append("")
    return lines


def variant_report(
    info: RunInfo, variant: str, changed: list[Change], results: Mapping[str, Result]
) -> list[str]:
    """The tests whose outcome ``variant`` changes against stock, with the assertion."""
    applied = [r for r in results.values() if r.schedulers]
    lines = [
        f"# vLLM {info.version}'s own tests under `{variant}` against stock, tier `{info.tier}`",
        "",
        f"Tests from {_source(info)}. The variant was applied to "
        f"{sum(r.schedulers for r in applied)} schedulers, built by {len(applied)} of "
        f"{len(results)} tests; its run took {info.wall_s:.0f} s.",
        "",
    ]
    if not changed:
        return [*lines, f"No test changes outcome under `{variant}`.", ""]
    lines += [
        f"{len(changed)} test(s) change outcome:",
        "",
        f"| test | stock | {variant} | assertion |",
        "|---|---|---|---|",
    ]
    lines += [f"| `{c.nodeid}` | {c.stock} | {c.variant} | {_cell(c.message)} |" for c in changed]
    return [*lines, ""]
