"""The waiting queues' settings a case can give: ``engine.policy`` (FCFS or priority),
``engine.prefill_schedule_interval`` and a request's ``priority`` reach vLLM's scheduler and
requests, are judged as input, and leave the digest of a case that does not use them alone."""

from __future__ import annotations

from typing import Any

import pytest

from matrix.case.expansion import cells_from_file
from matrix.case.format import CaseFile
from tests.helpers import WriteCase, assert_one_line_error, needs_vllm, replaced

QUEUES = """\
name: queues
groups:
  - {kind: full, block_size: 4}
engine: {policy: priority, prefill_schedule_interval: 3}
pool: 40
requests:
  - {id: urgent, prompt: 8, priority: -2}
  - {id: later, prompt: 8, async_load: false}
variants: [stock]
"""


def definition(path: Any) -> CaseFile:
    return cells_from_file(path)[0].case.definition


@needs_vllm
def test_queue_settings_reach_the_scheduler_and_its_requests(
    adapter: Any, write_case: WriteCase
) -> None:
    from vllm.v1.core.sched.request_queue import SchedulingPolicy

    case = adapter.resolve(definition(write_case(QUEUES)))
    handle = adapter.build(case, 40)
    scheduler = handle.scheduler
    assert scheduler.policy == SchedulingPolicy.PRIORITY
    assert scheduler.scheduler_config.prefill_schedule_interval == 3
    for spec in case.requests:
        handle.add_request(spec)
    assert {r.request_id: r.priority for r in scheduler.requests.values()} == {
        "urgent": -2,
        "later": 0,
    }


@pytest.mark.parametrize(
    ("change", "line", "words"),
    [
        (("policy: priority", "policy: lifo"), 4, "policy"),
        (("prefill_schedule_interval: 3", "prefill_schedule_interval: 0"), 4, "greater than"),
        (("priority: -2", "priority: high"), 7, "integer"),
    ],
)
def test_bad_queue_settings_are_one_line(
    write_case: WriteCase, change: tuple[str, str], line: int, words: str
) -> None:
    assert_one_line_error(write_case(replaced(QUEUES, change)), line, words)


def test_a_case_at_the_defaults_keeps_its_digest(write_case: WriteCase) -> None:
    """Stating the defaults (FCFS's absence, priority 0) names the same case as saying
    nothing, and a case using them is another case."""
    plain = replaced(
        QUEUES,
        ("engine: {policy: priority, prefill_schedule_interval: 3}\n", ""),
        ("priority: -2", "priority: 0"),
    )
    silent = replaced(plain, (", priority: 0", ""))
    digests = [
        cells_from_file(write_case(text, f"{i}.yaml"))[0].case.digest
        for i, text in enumerate((plain, silent, QUEUES))
    ]
    assert digests[0] == digests[1] != digests[2]
