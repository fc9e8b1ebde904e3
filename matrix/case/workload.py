"""A workload case: a stream of requests drawn from a seed instead of written out, arriving a
few steps apart, of three kinds: a full remote prefill (the whole prompt loaded
asynchronously), a partial prefix the connector's tier holds (the offloading pattern: the rest
of the prompt computed here) and a local prefill; swept at the pools from the one vLLM's
start-up sizing gives an engine serving them (``pool: {above_startable: N}``). What such a
case measures is cost, not only stalls: the steps to finish every request, each request's
completion, the preemptions (``matrix/judge/cost.py``, the reports' Workloads table).

Pure: the draw is a function of the workload's fields alone (``random.Random(seed)``), so the
same case gives the same requests on every machine and release.
"""

from __future__ import annotations

import random
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from matrix.case.strict import Strict

Kind = Literal["remote", "stored", "local"]
KINDS: tuple[Kind, ...] = ("remote", "stored", "local")


class Span(Strict):
    """Whole numbers from ``min`` to ``max``, each as likely."""

    min: Annotated[int, Field(ge=1)]
    max: Annotated[int, Field(ge=1)]

    @model_validator(mode="after")
    def _ordered(self) -> Span:
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min})")
        return self


class Workload(Strict):
    """How many requests, drawn from ``seed``: their prompts and outputs in tokens, their kinds
    by weight (``mix``), how much of a ``stored`` prompt its tier holds (a percentage span),
    how many steps apart they arrive (0: all before the first step), and after how many steps
    each load completes."""

    requests: Annotated[int, Field(ge=1, le=64)]
    seed: Annotated[int, Field(ge=0)] = 0
    prompt: Span
    max_tokens: Span = Span(min=1, max=8)
    mix: dict[Kind, Annotated[int, Field(ge=0)]] = {"remote": 1}
    stored_percent: Span = Span(min=25, max=75)
    arrive_every: Annotated[int, Field(ge=0, le=64)] = 1
    complete_load_after: Span = Span(min=1, max=3)

    @model_validator(mode="after")
    def _weighed(self) -> Workload:
        if not any(self.mix.values()):
            raise ValueError("mix: at least one kind with a weight above 0")
        if self.stored_percent.max > 100:
            raise ValueError("stored_percent: at most 100 (the tier holds part of the prompt)")
        return self


class StartableSweep(Strict):
    """Pool sizes from the one vLLM's start-up sizing gives an engine serving the case's
    requests (``startable``) to ``above_startable`` blocks over it."""

    above_startable: Annotated[int, Field(ge=0, le=64)]


def workload_requests(workload: Workload) -> list[dict[str, Any]]:
    """The workload's requests as a case writes them, drawn from its seed."""
    draw = random.Random(workload.seed)
    kinds = [kind for kind in KINDS if workload.mix.get(kind, 0)]
    weights = [workload.mix[kind] for kind in kinds]
    requests = []
    for index in range(workload.requests):
        kind = draw.choices(kinds, weights)[0]
        prompt = draw.randint(workload.prompt.min, workload.prompt.max)
        request: dict[str, Any] = {
            "id": f"w{index:02d}",
            "prompt": prompt,
            "max_tokens": draw.randint(workload.max_tokens.min, workload.max_tokens.max),
            "async_load": kind == "remote",
            "arrive_after": index * workload.arrive_every,
            "complete_load_after": draw.randint(
                workload.complete_load_after.min, workload.complete_load_after.max
            ),
        }
        if kind == "stored":
            share = draw.randint(workload.stored_percent.min, workload.stored_percent.max)
            request["stored"] = {"tokens": max(1, prompt * share // 100)}
        requests.append(request)
    return requests


def with_workload_requests(data: Any) -> Any:
    """A case's data with its workload's requests drawn (a case gives one or the other)."""
    if not isinstance(data, dict) or "workload" not in data:
        return data
    if "requests" in data:
        raise ValueError("a workload draws its requests: give `workload:` or `requests:`, not both")
    workload = Workload.model_validate(data["workload"])
    return {**data, "requests": workload_requests(workload)}
