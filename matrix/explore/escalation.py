"""``matrix explore --escalate FINDING``: does an unpromotable finding reach a deployment?

A finding that stalls below its fit breaks the admission contract, but with nothing else
running an engine never has so small a pool. Its deployment consequence is searched here: the
finding's layout (groups or model, speculative decoding, engine settings) with 2-4 concurrent
requests of its first request's shape, each an async load or a local prefill, loads completing
in any order, at pools from the larger of the fit and the smallest pool vLLM starts with
upward. A deadlock there (a stall or a hang at a pool an engine has) is written as a case
file; none in the scenarios run means it does not escalate in that many.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from matrix.case.reading import read_yaml
from matrix.explore.strategies import REQUEST_IDS, Draw, events_of


def finding_problem(path: Path) -> str | None:
    """Why ``path`` is no case file to escalate (one line, read without vLLM), or None."""
    from matrix.case.expansion import cells_from_file
    from matrix.case.loading import CaseFileError

    try:
        cells = cells_from_file(path)
    except CaseFileError as error:
        return str(error)
    return None if cells else f"{path}: no cells to escalate"


def not_failing(path: Path, variants: tuple[str, ...]) -> str | None:
    """Why ``path`` is no finding on the installed release under ``variants`` (its cells
    there pass, or it runs none of them), or None. Runs the case's cells: vLLM is imported."""
    from matrix.adapters.selection import select_adapter
    from matrix.case.expansion import cells_from_file
    from matrix.installed import installed_vllm_version
    from matrix.judge.verdict import judge_run
    from matrix.run.cell import run_cell

    adapter = select_adapter()
    cells = [c for c in cells_from_file(path) if c.variant in variants]
    names = ", ".join(variants)
    if not cells:
        return f"{path}: not a finding: it runs none of the variants searched ({names})"
    runnable = [c for c in cells if adapter.unsupported(c.case.definition) is None]
    if any(judge_run(run_cell(adapter, cell)).observed == "fail" for cell in runnable):
        return None
    return (
        f"{path}: not a finding on vLLM {installed_vllm_version()} under {names}: its "
        f"{len(cells)} cell(s) pass, so there is no failure to escalate"
    )


# What of the finding the crowd keeps: its layout and engine, not its pool, events or verdicts.
LAYOUT_KEYS = ("model", "layout", "max_model_len", "groups", "speculative", "engine", "limits")
MAX_OFFSET = 8  # the window's first pool, at most this far above where an engine can start
MAX_SPAN = 2
# Built once, as strategies.py's are.
_crowd = st.integers(2, len(REQUEST_IDS))
_local = st.booleans()
_after = st.integers(1, 3)
_offset = st.integers(0, MAX_OFFSET)
_span = st.integers(0, MAX_SPAN)


def finding_shape(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The finding's layout (as case data) and its first request's shape (no id, no prefix,
    no load kind: those the crowd draws)."""
    data, _ = read_yaml(path)
    if not isinstance(data, dict) or not data.get("requests"):
        raise ValueError(f"{path}: not a case file with requests")
    layout = {key: data[key] for key in LAYOUT_KEYS if key in data}
    drawn = ("id", "prefix", "async_load", "complete_load_after")
    request = {k: v for k, v in data["requests"][0].items() if k not in drawn}
    return layout, request


@st.composite
def crowds(draw: st.DrawFn, layout: dict[str, Any], request: dict[str, Any]) -> Draw:
    """2-4 requests of one shape on the finding's layout, and where their pool window lies."""
    count = draw(_crowd)
    requests = [
        {
            **request,
            "id": request_id,
            "async_load": not draw(_local),  # shrinks towards async loads
            "complete_load_after": draw(_after),
        }
        for request_id in REQUEST_IDS[:count]
    ]
    data = {"name": "escalated", **layout, "requests": requests}
    data["events"] = draw(events_of([r["id"] for r in requests]))
    return Draw(data, draw(_offset), draw(_span))
