"""A failed load under ``multi``: vLLM gives a request to the first child with a hit, so a
load a prefill child (NIXL) takes can fail even beside a tier child without a load-failure
path (Offloading); a failed load that child would take, or one behind it, is still refused."""

from __future__ import annotations

from matrix.adapters.connectors import family_of
from matrix.case.expansion import cells_from_file
from tests.helpers import WriteCase, replaced

FAILING = """\
name: failing
groups:
  - {kind: full, block_size: 4}
connector: multi
engine: {kv_load_failure_policy: recompute}
pool: 20
requests:
  - {id: remote, prompt: 16}
  - {id: tier, prompt: 16, async_load: false, stored: {tokens: 12}}
events:
  - step: 1
  - fail_load: [remote]
variants: [stock]
"""


def reason(write_case: WriteCase, text: str) -> str | None:
    case = cells_from_file(write_case(text))[0].case.definition
    return family_of(case).unsupported(case)


def test_a_prefill_childs_failed_load_runs_beside_a_tier_child(write_case: WriteCase) -> None:
    assert reason(write_case, FAILING) is None


def test_a_tier_childs_failed_load_is_refused(write_case: WriteCase) -> None:
    refusal = "MultiConnector's child offloading: OffloadingConnector has no load-failure path"
    tier_fails = replaced(FAILING, ("fail_load: [remote]", "fail_load: [tier]"))
    assert (reason(write_case, tier_fails) or "").startswith(refusal)
    tier_first = replaced(
        FAILING,
        (
            "connector: multi\n",
            "connector: multi\nconnector_options: {children: [offloading, nixl]}\n",
        ),
    )
    assert (reason(write_case, tier_first) or "").startswith(refusal)
