"""The connector axis (docs/connectors.md): the case keys and their rules, ids and digests,
the report's field and table, and each connector's load on vLLM's real scheduler side."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from typing import Any

import pytest

from matrix.case.connector import PREFILL_CONNECTORS
from matrix.case.expansion import cells_from_file
from matrix.case.reading import CaseFileError
from matrix.judge.result import CellResult
from matrix.report.connectors import connectors_table
from matrix.report.tables import brief_cell_text
from matrix.run.fit import measure_fit
from matrix.run.pools import run_pool
from tests.helpers import REPO, WriteCase, needs_vllm

PROBE = """\
name: probe
groups:
  - {kind: full, block_size: 16}
  - {kind: sliding_window, block_size: 16, window: 32}
pool: 64
requests:
  - {id: b, prompt: 96, stored: {tokens: 64}}
variants: [stock]
connector: nixl
"""
# The probe for a connector with no tier (NIXL and its kin): `stored` would be refused.
PREFILL_PROBE = PROBE.replace(", stored: {tokens: 64}", "")


def test_an_option_of_another_connector_is_an_error_at_its_line(write_case: WriteCase) -> None:
    path = write_case(
        PROBE.replace("connector: nixl", "connector: nixl\nconnector_options: {lazy_offload: true}")
    )
    with pytest.raises(CaseFileError) as raised:
        cells_from_file(path)
    assert raised.value.line == 10
    assert "'lazy_offload' is a setting of simple_cpu_offload, not of nixl" in str(raised.value)


def test_a_tier_holds_no_more_than_the_prompt(write_case: WriteCase) -> None:
    with pytest.raises(CaseFileError) as raised:
        cells_from_file(write_case(PROBE.replace("tokens: 64", "tokens: 97")))
    assert raised.value.line == 7
    assert "the tier holds 97 tokens of a 96-token prompt" in str(raised.value)


def test_what_a_connector_cannot_take_is_refused_at_its_line(write_case: WriteCase) -> None:
    """Issue 45's hostile connector cases: an Offloading chunk that is no whole number of the
    groups' blocks (an error cell at every pool before), a tier holding more than a prompt
    given in blocks (a pass, the tier cut to the prompt, before), and ``stored`` under a
    connector with no tier (ignored silently before)."""
    offloading = PROBE.replace("connector: nixl", "connector: offloading")
    cases = {
        "block_size: 24": (
            offloading + "connector_options: {block_size: 24}\n",
            10,
            "connector_options.block_size: block_size 24 is not a whole number of the groups' "
            "16-token blocks: use 32, or blocks_per_chunk",
        ),
        "stored.tokens: 100000": (
            offloading.replace(
                "prompt: 96, stored: {tokens: 64}", "prompt: {blocks: 2}, stored: {tokens: 100000}"
            ),
            7,
            "requests.0.stored.tokens: the tier holds 100000 tokens of a 32-token prompt",
        ),
        "stored under nixl": (
            PROBE,
            7,
            "requests.0.stored: nixl loads what a prefill instance computed, from no tier: "
            "stored is for offloading, simple_cpu_offload, mooncake_store (or multi over one "
            "of them)",
        ),
    }
    for name, (text, line, message) in cases.items():
        with pytest.raises(CaseFileError) as raised:
            cells_from_file(write_case(text))
        assert (raised.value.line, raised.value.message) == (line, message), name
    # A connector axis with a tier connector reads it: its NIXL points ignore it by design.
    assert cells_from_file(REPO / "connector_cases" / "probe.yaml")


def test_the_connector_is_in_the_id_of_other_connectors_only(write_case: WriteCase) -> None:
    default = cells_from_file(write_case(PREFILL_PROBE.replace("connector: nixl\n", "")))[0]
    assert default.test_id == "probe-stock"
    named = cells_from_file(write_case(PROBE.replace("nixl", "offloading")))[0]
    assert named.test_id == "probe[connector=offloading]-stock"


def test_a_case_naming_no_connector_keeps_its_digest(write_case: WriteCase) -> None:
    """The connector's fields, a workload's, a request's arrival, priority and prefix-cache
    reading, the queue and retention settings and a group's replay and checkpoint options at
    their defaults are left out of the digest: the same case without any of them digests as it
    did before they existed (a dump without them), what it expects aside (left out since
    releases may expect differently)."""
    cell = cells_from_file(
        write_case(PROBE.replace("connector: nixl\n", "").replace(", stored: {tokens: 64}", ""))
    )[0]
    definition = cell.case.definition
    old = definition.model_dump_json(
        exclude={
            "expect": True,
            "when": True,
            "connector": True,
            "connector_options": True,
            "workload": True,
            "requests": {
                0: {
                    "stored",
                    "complete_store_after",
                    "arrive_after",
                    "skip_reading_prefix_cache",
                    "priority",
                }
            },
            "engine": {
                "policy",
                "prefill_schedule_interval",
                "prefix_cache_retention_interval",
                "max_num_scheduled_tokens",
            },
            "groups": {
                0: {"bounded_replay", "prefill_checkpoint"},
                1: {"bounded_replay", "prefill_checkpoint"},
            },
        }
    )
    assert definition.identity_json() == old


def _cell(connector: str | None, variant: str, severity: str | None) -> CellResult:
    return CellResult(
        case="probe",
        column=None,
        variant=variant,
        expected="pass",
        expected_kind=None,
        observed="fail" if severity else "pass",
        kind="stall" if severity else "finished",
        detail="",
        source="probe.yaml:1",
        as_expected=True,
        severity=severity,  # type: ignore[arg-type]
        connector=connector,
    )


def test_the_connectors_table_gives_each_connector_its_worst_severity() -> None:
    cells = [
        _cell(None, "stock", None),
        _cell("offloading", "stock", "unpromotable"),
        _cell("offloading", "stock", None),
    ]
    header, rows = connectors_table(cells)
    assert header == ["Connector", "stock"]
    assert rows == [["nixl", "no failure (1 of 1)"], ["offloading", "unpromotable (1 of 2)"]]


def test_a_refusal_the_case_tolerates_reads_as_the_case_table_reads_it() -> None:
    """Issue 45: a cell passing within its fit_slack read ``pass*`` in Cases x variants but
    ``over_reservation (1 of 2)`` in the Connectors table; a failing refusal still reads so,
    and a skipped cell is unsupported."""
    tolerated = replace(_cell("offloading", "stock", None), severity="over_reservation")
    clean = _cell("offloading", "stock", None)
    assert brief_cell_text(tolerated) == "pass*"
    assert connectors_table([tolerated, clean])[1] == [["offloading", "pass* (1 of 2)"]]
    refused = _cell("offloading", "stock", "over_reservation")
    rows = connectors_table([tolerated, refused])[1]
    assert rows == [["offloading", "over_reservation (1 of 2)"]]
    skipped = replace(clean, observed="skip", kind="skipped", detail="why")
    assert connectors_table([skipped, clean])[1] == [
        ["offloading", "no failure (1 of 1), 1 unsupported"]
    ]
    assert connectors_table([skipped])[1] == [["offloading", "unsupported (1)"]]


def test_a_cell_record_keeps_its_connector_and_nixl_records_keep_their_shape() -> None:
    assert "connector" not in _cell(None, "stock", None).to_dict()
    record = _cell("mooncake_store", "stock", None).to_dict()
    assert CellResult.from_dict(record).connector == "mooncake_store"


# The probe: A (64 tokens) stored, B = A + 32; each connector's hit at pool 64.
HITS = {
    "nixl": 96,
    "nixl_push": 96,
    "offloading": 48,
    "simple_cpu_offload": 64,
    "mooncake_store": 64,
    "multi": 96,
    "mooncake": 96,
}


def _first_load(adapter: Any, case: Any) -> int:
    """The tokens the case's request holds when it first waits for its load, at pool 64; the
    run finishes with no block leaked."""
    trace = run_pool(adapter, case, "stock", 64)
    loading = [
        r.state.requests[0]
        for r in trace.steps
        if r.state.requests[0].status == "WAITING_FOR_REMOTE_KVS"
    ]
    assert trace.stopped == "finished" and not trace.leak
    return loading[0].num_computed_tokens


def _probe(write_case: WriteCase, connector: str) -> Any:
    """The probe's case under ``connector``."""
    text = PREFILL_PROBE if connector in PREFILL_CONNECTORS else PROBE
    return cells_from_file(write_case(text.replace("nixl", connector)))[0].case.definition


def _needs(module: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None, reason=f"'{module}' is not installed"
    )


# The connectors the probe runs under (MooncakeConnector needs uvicorn).
PROBED = [pytest.param(c, marks=_needs("uvicorn")) if c == "mooncake" else c for c in sorted(HITS)]


@needs_vllm
@pytest.mark.parametrize("connector", PROBED)
def test_each_connector_loads_what_it_matches(
    adapter: Any, write_case: WriteCase, connector: str
) -> None:
    assert _first_load(adapter, _probe(write_case, connector)) == HITS[connector]


# docs/connectors.md's "The probe's fits": per connector, the smallest pool in which B finishes
# (stock) and the harness's fit (B's peak use alone); MooncakeStore's save jobs hold two more.
FINISHES_FROM = {c: 12 if c == "offloading" else 11 for c in HITS}
FITS = {**FINISHES_FROM, "mooncake_store": 13}


@needs_vllm
@pytest.mark.parametrize("connector", PROBED)
def test_each_connector_has_the_probe_s_fit_and_smallest_finishing_pool(
    adapter: Any, write_case: WriteCase, connector: str
) -> None:
    case = _probe(write_case, connector)
    smallest = FINISHES_FROM[connector]
    stopped = {
        pool: run_pool(adapter, case, "stock", pool).stopped for pool in (smallest - 1, smallest)
    }
    assert stopped[smallest] == "finished" and stopped[smallest - 1] != "finished"
    assert measure_fit(adapter, case).blocks == FITS[connector]


@needs_vllm
@_needs("msgpack")
def test_moriio_loads_the_prompt_and_tells_the_prefill_instance_its_blocks(
    adapter: Any, write_case: WriteCase
) -> None:
    """MoRIIO's WRITE mode: the decode side sends the (simulated) prefill instance the
    blocks to write into; one group, as it refuses sliding-window groups."""
    one_group = PREFILL_PROBE.replace(
        "  - {kind: sliding_window, block_size: 16, window: 32}\n", ""
    )
    case = cells_from_file(write_case(one_group.replace("nixl", "moriio")))[0].case.definition
    assert _first_load(adapter, case) == 96
    assert adapter.build(case, 64).side.notified == []  # nothing sent before a load


@needs_vllm
@_needs("msgpack")
def test_a_case_a_connector_refuses_when_built_is_unsupported_with_its_message(
    adapter: Any, write_case: WriteCase
) -> None:
    case = cells_from_file(write_case(PREFILL_PROBE.replace("nixl", "moriio")))[0].case.definition
    reason = adapter.unsupported(case) or ""
    assert "MoRIIOConnector's scheduler side refuses this case" in reason
    assert "sliding-window" in reason


@needs_vllm
def test_a_tier_whose_lookup_finds_nothing_is_unsupported(
    adapter: Any, write_case: WriteCase
) -> None:
    """Less than a block stored: the connector's lookup finds nothing, so its cells would
    pass without a load; the probed case beside it loads and runs."""
    short = PROBE.replace("nixl", "offloading").replace("tokens: 64", "tokens: 8")
    case = cells_from_file(write_case(short))[0].case.definition
    assert "lookup finds none of what its tier holds" in (adapter.unsupported(case) or "")
    stored = cells_from_file(write_case(PROBE.replace("nixl", "offloading")))[0].case.definition
    assert adapter.unsupported(stored) is None


@needs_vllm
def test_a_case_whose_loads_are_all_synchronous_is_unsupported(
    adapter: Any, write_case: WriteCase
) -> None:
    """Issue 45 item 3: Offloading with a sync-load budget covering the hit, MooncakeStore
    with ``load_async: false`` and NIXL with no request to load find the prefix, or compute it,
    within the step: no request waits for a load, so no cell of them may pass."""
    from matrix.adapters.requirements import missing_connector_options  # imports vLLM

    for connector, options in (
        ("offloading", "{sync_load_budget_bytes: 1099511627776}"),
        ("mooncake_store", "{load_async: false}"),
    ):
        text = PROBE.replace("nixl", connector) + f"connector_options: {options}\n"
        case = cells_from_file(write_case(text))[0].case.definition
        reason = adapter.unsupported(case) or ""
        if connector == "offloading" and missing_connector_options(
            connector, ["sync_load_budget_bytes"]
        ):
            assert reason == adapter.lacks(case), reason  # 0.30-0.32: the option came with 0.33
            assert "offloading connector has no option sync_load_budget_bytes" in reason
            continue
        assert "loads what its tier holds within the step" in reason, (connector, reason)
        assert "no request's load is asynchronous" in reason
    local = PROBE.replace(", stored: {tokens: 64}", ", async_load: false")
    case = cells_from_file(write_case(local))[0].case.definition
    assert "async_load: false for every one" in (adapter.unsupported(case) or "")
    probe = cells_from_file(write_case(PREFILL_PROBE))[0].case.definition
    assert adapter.unsupported(probe) is None


@needs_vllm
def test_a_connector_that_would_not_load_is_unsupported(
    adapter: Any, write_case: WriteCase
) -> None:
    mamba = PROBE.replace(
        "{kind: sliding_window, block_size: 16, window: 32}",
        "{kind: mamba, block_size: max_model_len, mamba_mode: none}",
    )
    for connector, words in (
        ("offloading", "cannot be built with Mamba 'none'"),
        ("simple_cpu_offload", "turns itself off without prefix caching"),
        ("mooncake_store", "refuses Mamba groups"),
    ):
        case = cells_from_file(write_case(mamba.replace("nixl", connector)))[0].case.definition
        assert words in (adapter.unsupported(case) or "")
    windows_only = PROBE.replace("nixl", "simple_cpu_offload").replace(
        "{kind: full, block_size: 16}", "{kind: sliding_window, block_size: 16, window: 64}"
    )
    case = cells_from_file(write_case(windows_only))[0].case.definition
    assert "asserts the layout has one" in (adapter.unsupported(case) or "")
    failing = PROBE.replace("nixl", "offloading") + "events:\n  - fail_load: [b]\n"
    case = cells_from_file(write_case(failing))[0].case.definition
    assert "has no load-failure path" in (adapter.unsupported(case) or "")


# CI's subset of the connector axis: every connector, a few cells each (tox -m connectors runs
# every connector case on every release).
EVERY_CONNECTOR = REPO / "connector_cases" / "every_connector.yaml"


def test_every_connector_runs_as_its_case_expects(inline: pytest.Pytester) -> None:
    """The connectors' CI subset, in this process (vLLM imported already), as CI runs it."""
    result = inline.runpytest_inprocess(str(EVERY_CONNECTOR), "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()[-3000:]
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) > 0 and "failed" not in outcomes
