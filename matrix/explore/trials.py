"""One drawn scenario run on the real scheduler under one variant, judged like a pytest cell,
and a finding written as a YAML case file that ``pytest FILE`` reproduces.

A scenario runs at the few pool sizes of its window (``scenarios.Draw``), judged by
``verdict.judge_cell`` against the measured fit exactly as ``harness.run_cell`` judges the
written case; its tightness comes from pools scanned upwards from the fit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from matrix.adapters.protocol import VersionAdapter
from matrix.case.format import CaseFile
from matrix.case.loading import with_model
from matrix.explore.strategies import Draw, layout_family
from matrix.judge.runs import RunOutcome, classify_run
from matrix.judge.severity import NEVER_AGAIN, pool_failures, worst
from matrix.judge.tightness import over_reservation, tightness_label
from matrix.judge.verdict import judge_cell
from matrix.run.fit import measure_fit
from matrix.run.pools import run_pool
from matrix.run.served import served_fit, served_reruns

# How far above the fit the tightness scan looks for the first pool where everything finishes.
SCAN_ABOVE_FIT = 16


@dataclass(frozen=True)
class Trial:
    """A scenario's result under one variant: the case as written, and how it went."""

    variant: str
    data: dict[str, Any]  # the case file's data, pool included
    failed: bool
    kind: str  # "finished" or the failure kind
    detail: str
    tightness: str  # see tightness.tightness_label; empty when not asked for
    severity: str | None = None  # how bad the worst failing pool is (judge.severity)
    prefix: str = "found"  # of its case file's name: "escalated" for an escalation search

    @property
    def key(self) -> tuple[str, str, str]:
        """What makes two failures distinct: variant, kind and layout family."""
        return self.variant, self.kind, layout_family(self.data)

    @property
    def name(self) -> str:
        """The finding's case name: its prefix (``found_``) and its key."""
        return f"{self.prefix}_" + "_".join(self.key).replace("+", "_")


def default_slack(data: dict[str, Any]) -> int:
    """One block per attention group: the fix's margin rounds ceil(N / block size) up per
    group whatever the prompt's alignment, which every margin variant does by design."""
    return sum(1 for g in data.get("groups", ()) if g["kind"] != "mamba")


# Keyed by the scenario without its pool and the variant: redrawn scenarios scan once.
_tightness: dict[str, str] = {}


def trial(
    adapter: VersionAdapter,
    draw: Draw,
    variant: str,
    slack: int | None = None,
    tightness: bool = False,
    deployable: bool = False,
) -> Trial | None:
    """The scenario under ``variant``, and with ``tightness`` its over-reservation (pools
    scanned upwards from the fit); None when the release cannot run it. ``deployable`` places
    the window where a real engine can be: from the larger of the fit and the smallest pool
    vLLM starts with up."""
    data = {**draw.data, "fit_slack": default_slack(draw.data) if slack is None else slack}
    # Validated once: the pool and the requests alone are set by copies, which need no check.
    case = adapter.resolve(validated({**data, "pool": 2}))
    if adapter.unsupported(case):
        return None
    try:
        fit = measured_fit(adapter, case)
    except Exception as error:  # run_cell fails the cell the same way
        written = draw.case_data(0) | {"fit_slack": data["fit_slack"]}
        detail = f"{type(error).__name__}: {error}"
        return Trial(variant, written, True, "error", detail, "error", "error")
    startable = adapter.startable(case).blocks if deployable else None
    start, stop = draw.pools(fit)
    if deployable:
        start = max(fit, startable or 0) + max(0, draw.offset)
        stop = start + draw.span
    pool: int | dict[str, int] = start if start == stop else {"start": start, "stop": stop}
    written = {**draw.data, "pool": pool, "fit_slack": data["fit_slack"]}
    runs = {p: classify_run(run_pool(adapter, case, variant, p)) for p in range(start, stop + 1)}
    verdict = judge_cell(list(runs.values()), fit, case.fit_slack)
    tight = ""
    if tightness:  # a stall is under-reservation whatever the larger pools do: no scan for it
        tight = "stall" if verdict.kind == "stall" else _scan(adapter, case, variant, fit, runs)
    failed = verdict.observed == "fail"
    severity = None
    if failed:  # how bad, against the pool vLLM would start with (asked of failures only)
        sized = adapter.startable(case)
        never = [p for p, outcome in runs.items() if outcome.kind in NEVER_AGAIN]
        again = served_reruns(adapter, case, variant, never, fit, sized)
        failures = pool_failures(
            list(runs.values()),
            fit,
            sized.blocks,
            served_fit(adapter, case, fit, sized),
            {trace.pool: classify_run(trace).kind for trace in again},
        )
        worst_found = worst(failures)
        # A deployable search looks for what an engine can hit: a failure that is one only
        # at the case's longer max_model_len (undersized alone) is not a finding there.
        failed = worst_found is not None or not deployable
        severity = worst_found or verdict.kind
    return Trial(variant, written, failed, verdict.kind, verdict.detail, tight, severity)


def validated(data: dict[str, Any]) -> CaseFile:
    """``data`` as a case, a model it names described from its model file (as the loader
    fills ``described``)."""
    if "described" not in data:
        data = with_model(data, None)
    return CaseFile.model_validate(data)


def measured_fit(adapter: VersionAdapter, case: CaseFile) -> int:
    """The case's fit, measured per request so each request alone is measured once."""
    alone = (case.model_copy(update={"requests": [r]}) for r in case.requests)
    return max(measure_fit(adapter, one).blocks for one in alone)


def _scan(
    adapter: VersionAdapter, case: CaseFile, variant: str, fit: int, runs: dict[int, RunOutcome]
) -> str:
    key = case.run_key(without=frozenset({"pool"})) + variant
    if key not in _tightness:
        scanned: list[RunOutcome] = []
        for pool in range(fit, fit + SCAN_ABOVE_FIT + 1):
            outcome = runs.get(pool) or classify_run(run_pool(adapter, case, variant, pool))
            scanned.append(outcome)
            if outcome.kind in ("finished", "stall", "error"):
                break
        last = scanned[-1]
        over = over_reservation(scanned, fit) if last.kind == "finished" else None
        _tightness[key] = tightness_label(last.kind, over)
    return _tightness[key]


def case_yaml(found: Trial, provenance: str) -> str:
    """The finding as a case file: its name, what failed, and only the explored variant."""
    body = {k: v for k, v in found.data.items() if k != "name"}
    document = {
        "name": found.name,
        "description": f"{provenance}. {found.kind}: {found.detail}",
        **body,
        "variants": [found.variant],
    }
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=None, width=100)


def write_case(found: Trial, out: Path, provenance: str) -> Path:
    """Writes the finding's case file into ``out``; returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{found.name}.yaml"
    path.write_text(case_yaml(found, provenance), encoding="utf-8")
    return path


def smaller(first: Trial, second: Trial) -> Trial:
    """The simpler of two findings of one key, by their case's size, then text."""

    def size(found: Trial) -> tuple[int, str]:
        text = json.dumps(found.data, sort_keys=True)
        return len(text), text

    return first if size(first) <= size(second) else second
