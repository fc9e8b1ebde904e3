"""The live mode's pure parts (which cases an engine runs, the tiny model, prompts, outcomes,
pools, the report) and its clean skip where vLLM finds no device. The engine itself is tested
in test_live_engine.py, in the live envs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from matrix.adapters.protocol import FINISHED, LOADING, RUNNING, WAITING, RequestState
from matrix.adapters.protocol import SchedulerState as State
from matrix.case.expansion import cells_from_file
from matrix.case.format import CaseFile
from matrix.live.layout import SAMPLED_TOKEN, live_tokens, live_unsupported, model_config, model_dir
from matrix.live.outcome import PoolAgreement, live_outcome, outcome_ranges, pools_to_run
from matrix.live.report import (
    Disagreement,
    LiveCell,
    LiveReport,
    exit_status,
    terminal_text,
    to_json,
    write,
)
from matrix.run.records import RunTrace, StepRecord
from tests.helpers import CASES, needs_vllm

LIVE_CASES = sorted(CASES.glob("live_*.yaml"))


def definition(name: str) -> CaseFile:
    return cells_from_file(CASES / f"{name}.yaml")[0].case.definition


def case_with(**changes: object) -> CaseFile:
    return definition("live_two_loads").model_copy(update=changes)


@pytest.mark.parametrize("path", LIVE_CASES, ids=lambda p: p.stem)
def test_the_live_counterparts_run_on_a_cpu_engine(path: Path) -> None:
    for cell in cells_from_file(path):
        assert live_unsupported(cell.case.definition, on_cpu=True) is None


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("single_group", "multiple of 32 tokens, not 4"),
        ("multiple_groups", "would be one"),  # full+full: one group in a real engine
        ("different_block_sizes", "groups of 4 and 8 tokens"),
        ("mamba_none", "multiple of 32 tokens, not 4"),
    ],
)
def test_table_cases_are_skipped_with_the_reason(name: str, reason: str) -> None:
    found = live_unsupported(definition(name), on_cpu=True)
    assert found is not None and reason in found


def test_speculation_and_failures_the_engine_cannot_reproduce_are_skipped() -> None:
    speculative = definition("live_two_loads").speculative
    assert speculative is not None
    eagle = case_with(speculative=speculative.model_copy(update={"method": "eagle"}))
    assert "ngram only" in (live_unsupported(eagle, on_cpu=True) or "")
    rejecting = case_with(speculative=speculative.model_copy(update={"accept": "none"}))
    assert "accept: none" in (live_unsupported(rejecting, on_cpu=True) or "")
    failing = definition("failed_load").model_copy(
        update={"groups": definition("live_two_loads").groups, "speculative": None}
    )
    assert "never failed" in (live_unsupported(failing, on_cpu=True) or "")


def test_a_gpu_is_not_held_to_the_cpu_block_sizes() -> None:
    assert live_unsupported(definition("no_speculation"), on_cpu=False) is None
    assert "multiple of 32" in (live_unsupported(definition("no_speculation"), on_cpu=True) or "")


def test_mamba_layouts_a_real_engine_cannot_build_are_skipped() -> None:
    full, mamba = definition("live_align_undercount").groups
    assert live_unsupported(definition("live_align_undercount"), on_cpu=True) is None
    windowed = full.model_copy(update={"kind": "sliding_window", "window": 128})
    assert "full attention beside" in (
        live_unsupported(case_with(groups=[windowed, mamba]), True) or ""
    )
    wider = mamba.model_copy(update={"block_size": 64})
    found = live_unsupported(case_with(groups=[full, wider], speculative=None), True)
    assert found is not None and "blocks of the attention block (32 tokens), not 64" in found
    unbounded = mamba.model_copy(update={"mamba_mode": "none"})
    found = live_unsupported(case_with(groups=[full, unbounded], speculative=None), True)
    assert found is not None and "max_model_len (1024 tokens), not 32" in found
    alone = live_unsupported(case_with(groups=[mamba], speculative=None), True)
    assert "an attention layer beside" in (alone or "")


def test_a_mamba_layout_is_a_tiny_nemotron_h_with_a_layer_per_group() -> None:
    full, mamba = definition("live_align_undercount").groups
    config = model_config(case_with(groups=[mamba, full, mamba], speculative=None))
    assert config["architectures"] == ["NemotronHForCausalLM"]
    assert config["hybrid_override_pattern"] == "MM*" and config["num_hidden_layers"] == 3
    assert config["chunk_size"] == 32


def test_the_model_has_a_layer_per_group_and_is_written_once(tmp_path: Path) -> None:
    case = definition("live_two_loads")
    config = model_config(case)
    assert config["layer_types"] == ["full_attention", "sliding_attention"]
    assert config["sliding_window"] == 64 and config["num_hidden_layers"] == 2
    first = model_dir(case, tmp_path)
    written = (first / "config.json").stat().st_mtime_ns
    assert model_dir(case, tmp_path) == first
    assert (first / "config.json").stat().st_mtime_ns == written
    assert json.loads((first / "config.json").read_text()) == config
    assert model_dir(definition("live_single_group"), tmp_path) != first


def test_prompts_are_distinct_and_end_in_the_sampled_token() -> None:
    head, tail = live_tokens("head", 128), live_tokens("tail", 128)
    assert head[-32:] == [SAMPLED_TOKEN] * 32 and SAMPLED_TOKEN not in head[:-32]
    assert head[0] != tail[0]
    assert live_tokens("a", 8)[-7:] == [SAMPLED_TOKEN] * 7 and live_tokens("a", 8)[0] != 7


def record(step: int, *requests: RequestState, scheduled: int = 0) -> StepRecord:
    ran = (("a", scheduled),) if scheduled else ()
    return StepRecord(step, ran, State(requests, 3), 3)


def trace(stopped: str, *requests: RequestState, leak: str = "") -> RunTrace:
    return RunTrace(8, (record(1, *requests),), stopped, leak=leak)  # type: ignore[arg-type]


def test_live_outcomes_from_the_step_records() -> None:
    done = RequestState("a", FINISHED, 0, True, 0)
    loaded = RequestState("a", WAITING, 127, True, 0)
    refused = RequestState("b", WAITING, 0, False, 0)
    assert live_outcome(trace("finished", done)) == "finished"
    assert live_outcome(trace("stuck", loaded, refused)) == "hang"
    assert live_outcome(trace("stuck", refused)) == "refused"
    assert live_outcome(trace("stuck", RequestState("c", RUNNING, 0, False, 1))) == "hang"
    assert live_outcome(trace("stuck", RequestState("c", LOADING, 0, True, 0))) == "hang"
    assert live_outcome(trace("error", refused)) == "error"
    assert live_outcome(trace("finished", done, leak="lost 1")) == "leak"


def test_pools_run_live() -> None:
    swept = list(range(4, 21))
    assert pools_to_run(swept, (7, 8, 13, 14), "all", 9) == swept
    assert pools_to_run(swept, (7, 8, 13, 14), "failing", 9) == [6, 7, 8, 9, 12, 13, 14, 15]
    assert pools_to_run(swept, (4, 20), "failing", 9) == [4, 5, 19, 20]
    # A passing cell: where its requests start to finish.
    assert pools_to_run(swept, (), "failing", 9) == [8, 9]


def agreement(pool: int, harness: str, live: str) -> PoolAgreement:
    return PoolAgreement(pool, "stall" if harness == "hang" else harness, harness, live)  # type: ignore[arg-type]


def report_of(*pools: PoolAgreement, skipped: str = "") -> LiveReport:
    disagreements = tuple(
        Disagreement(p.pool, ("step 1: harness",), ("step 1: live",)) for p in pools if not p.agrees
    )
    cells = (
        LiveCell(
            "live_two_loads",
            "original",
            "live_two_loads.yaml:20",
            "stall",
            9,
            pools=pools,
            disagreements=disagreements,
        ),
        LiveCell("single_group[k=1]", "none", "single_group.yaml:13", skipped=skipped or "why"),
    )
    return LiveReport("0.31.0", "cpu", pools="all", hang_steps=8, cells=cells, wall_seconds=3.0)


def test_agreement_in_the_table_and_the_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # xdist's workers say 80: the table would wrap
    agreeing = report_of(agreement(7, "refused", "refused"), agreement(8, "hang", "hang"))
    assert exit_status(agreeing) == 0
    data = to_json(agreeing)
    ran = data["cells"][0]
    assert ran["live_outcomes"] == {"7": "refused", "8": "hang"} and ran["live_agrees"] is True
    assert ran["harness_kinds"]["8"] == "stall"
    assert data["cells"][1] == {
        "case": "single_group[k=1]",
        "variant": "none",
        "source": "single_group.yaml:13",
        "skipped": "why",
    }
    assert data["summary"]["cells_run"] == 1 and data["summary"]["cells_skipped"] == 1
    text = terminal_text(agreeing)
    assert "refused 7; hang 8" in text and "Skipped" in text
    write(tmp_path / "live.json", agreeing)
    write(tmp_path / "live.md", agreeing)
    assert json.loads((tmp_path / "live.json").read_text())["summary"]["agree"] == 1
    assert "| live_two_loads-original |" in (tmp_path / "live.md").read_text()


def test_a_disagreement_fails_with_both_traces() -> None:
    report = report_of(agreement(8, "hang", "finished"))
    assert exit_status(report) == 1
    text = terminal_text(report)
    assert "pool 8: harness stall (hang), live finished" in text
    assert "the harness's trace:\n    step 1: harness" in text
    assert "the live engine's trace:\n    step 1: live" in text
    cell = to_json(report)["cells"][0]
    assert cell["live_agrees"] is False
    assert cell["disagreements"] == [
        {"pool": 8, "harness_trace": ["step 1: harness"], "live_trace": ["step 1: live"]}
    ]
    assert outcome_ranges(report.cells[0].pools, harness=True) == "hang 8"


def test_no_cell_run_with_a_device_fails_but_no_device_does_not() -> None:
    nothing = LiveReport("0.31.0", "cpu", cells=(LiveCell("a", "stock", "a.yaml:1", skipped="x"),))
    assert exit_status(nothing) == 1
    assert exit_status(LiveReport("0.33.0", "", no_device="no GPU")) == 0


@needs_vllm
def test_without_a_device_the_live_mode_skips_cleanly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lean envs' vLLM (the CUDA wheel, no GPU): vLLM detects no platform, and the live
    mode says so and runs nothing. On a GPU or with vLLM's CPU wheel there is a device."""
    from vllm.platforms import current_platform

    from matrix.__main__ import main

    if current_platform.is_cpu() or current_platform.is_cuda_alike():
        pytest.skip(f"vLLM detects a device here ({current_platform.device_type})")
    report = tmp_path / "live.json"
    assert main(["live", str(CASES / "live_two_loads.yaml"), "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "every cell skipped: vLLM detects no device to run an engine on" in out
    data = json.loads(report.read_text())
    assert data["no_device"] and data["cells"] == []


def test_live_arguments_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    from matrix.__main__ import main

    assert main(["live", "--report", "out.txt"]) == 2
    assert "use a .md or .json file name" in capsys.readouterr().err
    assert main(["live", "--hang-steps", "0"]) == 2


def test_a_case_file_that_does_not_load_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from matrix.__main__ import main

    broken = tmp_path / "broken.yaml"
    broken.write_text("name: broken\ngroups: 3\n")
    assert main(["live", str(broken)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"{broken}:") and "\n" not in error
