"""A model file a user cannot get silently wrong (issue 19): each slip is one line at its place,
worded for model files, at ``validate``, at a run and at ``show-layout``; a run that skips every
cell of a case or a model fails. The bad files themselves are tests/corpus/models/ (their lines
in tests/corpus/expected.txt, checked by tests/test_hostile_input.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from matrix.__main__ import main
from matrix.case.expansion import cells_from_file
from matrix.case.loading import read_description
from matrix.case.model_paths import SHIPPED_MODELS as SHIPPED_DESCRIPTIONS
from matrix.judge.result import CellResult, wholly_skipped
from tests.helpers import REPO, needs_vllm, replaced

GRANITE = (SHIPPED_DESCRIPTIONS / "granite-4.0-h-tiny.yaml").read_text()
CASE = """\
name: granite
model: granite-4.0-h-tiny
max_model_len: 1024
pool: {below: 0, above: 0}
requests:
  - {id: a, prompt: {blocks: 1}}
variants: [stock, fixed]
"""


def model_folder(tmp_path: Path, model: str) -> Path:
    """A case naming a model file beside it, in ``tmp_path``; returns the case's path."""
    (tmp_path / "models").mkdir(exist_ok=True)
    (tmp_path / "models" / "granite-4.0-h-tiny.yaml").write_text(model)
    (tmp_path / "granite.yaml").write_text(CASE)
    return tmp_path / "granite.yaml"


def validated(paths: list[Path], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """validate's exit code and its lines but the ok ones and the summary."""
    status = main(["validate", *map(str, paths)])
    *lines, summary = capsys.readouterr().out.splitlines()
    assert summary.endswith(": ok") == (status == 0)
    return status, [line for line in lines if ": ok, " not in line]


def test_a_model_file_error_is_worded_for_model_files(tmp_path: Path) -> None:
    """Issue item 6: not 'case:' at the file's first lines, and 'missing' said as such."""
    text = replaced(GRANITE, ("num_kv_heads: 4  # num_key_value_heads\n", ""))
    path = model_folder(tmp_path, text)
    with pytest.raises(Exception) as caught:
        cells_from_file(path)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path}/models/granite-4.0-h-tiny.yaml:11: layer_pattern: ")
    assert "has attention layers, so 'num_kv_heads' is needed" in message
    assert "case:" not in message


@needs_vllm
def test_validate_checks_the_model_files_cases_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue item 1: a misspelt architecture in the model file a case names fails validate,
    with a did-you-mean, at the model file's line."""
    path = model_folder(
        tmp_path, replaced(GRANITE, ("GraniteMoeHybridForCausalLM", "GraniteMoeHybridForCausalM"))
    )
    status, problems = validated([path], capsys)
    assert status == 1
    assert problems == [
        f"{tmp_path}/models/granite-4.0-h-tiny.yaml:8: architecture: the installed vLLM does "
        "not know 'GraniteMoeHybridForCausalM': did you mean 'GraniteMoeHybridForCausalLM'?"
    ]


@needs_vllm
def test_every_shipped_model_file_passes_the_installed_checks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, problems = validated([SHIPPED_DESCRIPTIONS, REPO / "cases"], capsys)
    assert (status, problems) == (0, [])


@needs_vllm
def test_a_description_is_checked_alike_once_vllm_has_read_its_config_json() -> None:
    """Reading kimi-linear-48b-a3b/config.json makes vLLM register its own KimiLinearConfig
    for kimi_linear (a dataclass only through transformers' base class) and its model lives in
    a package (vllm/models/kimi_k3/): the description's keys are still the class's."""
    from matrix.adapters.config_json import model_config
    from matrix.adapters.model_files import config_class, unknown_keys
    from matrix.case.config_json import config_model

    model_config(config_model(SHIPPED_DESCRIPTIONS / "kimi-linear-48b-a3b" / "config.json"))
    assert config_class("kimi_linear").__module__.startswith("vllm.")
    described = read_description(SHIPPED_DESCRIPTIONS / "kimi-linear-48b-a3b.yaml")
    assert unknown_keys(described.hf_config, described.architecture) == []
    assert unknown_keys({"model_type": "kimi_linear", "hiden_size": 1}) != []


@needs_vllm
def test_transformers_refusal_is_one_line_in_a_run(adapter: Any, tmp_path: Path) -> None:
    """Issue item 3: a config transformers refuses skips the cells with one line naming the
    file's key, never a traceback (six of them under pytest before)."""
    path = model_folder(tmp_path, replaced(GRANITE, ("  mamba_n_heads: 48\n", "")))
    reason = adapter.unsupported(cells_from_file(path)[0].case.definition)
    assert "\n" not in reason
    assert reason.startswith("vLLM ")
    assert "hf_config: transformers' GraniteMoeHybridConfig refuses it: ValueError: " in reason
    assert "mamba_n_heads" in reason


@needs_vllm
def test_a_misspelt_key_is_caught_before_it_changes_the_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue item 2: ``mamba_dstate`` would take transformers' default of 256 state and make
    the attention block 784 tokens instead of Granite's 400."""
    from matrix.tools.show_layout import main as show_layout
    from tests.test_models import layout

    assert layout("granite-4.0-h-tiny")["groups"][-1]["block_size"] == 400
    models = tmp_path / "models"
    models.mkdir()
    bad = models / "granite-typo.yaml"
    bad.write_text(replaced(GRANITE, ("mamba_d_state: 128", "mamba_dstate: 128")))
    import argparse

    options = {"tp": 1, "mamba_mode": "none", "spec_tokens": 0, "block_size": None}
    status = show_layout(
        argparse.Namespace(**options, max_model_len=4096, json=False, model=str(bad), device=None)
    )
    out = capsys.readouterr().out
    assert status == 2
    assert out == (
        f"{bad}:29: hf_config.mamba_dstate: GraniteMoeHybridConfig has no key 'mamba_dstate', "
        "nor does vLLM's GraniteMoeHybridForCausalLM read one: it would be ignored and its "
        "default taken: did you mean 'mamba_d_state'?\n"
    )


def test_numbers_stated_twice_are_compared() -> None:
    model = read_description(SHIPPED_DESCRIPTIONS / "granite-4.0-h-tiny.yaml")
    assert model.hf_config["num_key_value_heads"] == model.num_kv_heads == 4
    assert model.hf_config["num_hidden_layers"] == model.num_layers == 40


def result(case: str, observed: str, model: str | None = None) -> CellResult:
    return CellResult(
        case=case,
        column=None,
        variant="stock",
        expected="pass",
        expected_kind=None,
        observed=observed,  # type: ignore[arg-type]
        kind="skipped" if observed == "skip" else "finished",
        detail="vLLM 0.33.0 cannot derive model m's layout: why" if observed == "skip" else "",
        source="c.yaml:1",
        as_expected=True,
        model=model,
    )


def test_a_case_or_model_skipped_whole_is_named() -> None:
    """Issue item 1: one skipped case among passing ones is reported, with the reason."""
    cells = [
        result("a[k=1]", "pass"),
        result("b[k=1]", "skip", "m"),
        result("b[k=2]", "skip", "m"),
        result("c", "skip", "n"),
        result("d", "pass", "n"),
    ]
    assert wholly_skipped(cells) == [
        "every cell of case b is unsupported (2): vLLM 0.33.0 cannot derive model m's layout: why",
        "every cell of case c is unsupported (1): vLLM 0.33.0 cannot derive model m's layout: why",
    ]
    assert wholly_skipped(cells[:1]) == []


@needs_vllm
def test_a_run_that_skips_a_whole_case_fails_with_the_reason(inline: pytest.Pytester) -> None:
    """Issue item 1: a model file vLLM cannot derive beside a case that runs: the run used to
    pass, testing nothing of that model."""
    cases = inline.path / "cases"
    model_folder(cases.mkdir() or cases, replaced(GRANITE, ("ForCausalLM", "ForCausalL")))
    (cases / "small.yaml").write_text(
        "name: small\ngroups: [{kind: full, block_size: 4}]\npool: 12\n"
        "requests: [{id: a, prompt: 16}]\nvariants: [fixed]\n"
    )
    inline.makefile(".ini", pytest="[pytest]\nmatrix_cases = cases\n")
    result = inline.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=2)
    assert result.ret != 0
    # The summary line is wrapped to the terminal's width: read it as one text.
    text = " ".join(" ".join(result.stdout.lines).split())
    assert re.search(
        r"matrix: FAILED: every cell of case granite is unsupported \(2\): vLLM \S+ cannot derive "
        r"model granite-4.0-h-tiny's layout: the installed vLLM does not know "
        r"'GraniteMoeHybridForCausalL': did you mean 'GraniteMoeHybridForCausalLM'\?",
        text,
    )


GEMMA_PAST = """\
name: gemma_past
model: gemma-2-2b
max_model_len: 1024
speculative: {method: eagle, num_tokens: 1}
pool: {below: 1, above: 1}
fit_slack: 1
requests:
  - {id: a, prompt: {blocks: 4, offset: 1}}
"""


@needs_vllm
def test_a_fit_slack_below_the_layouts_round_up_is_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue item 7: the README's fit_slack 1 on a two-attention-group model refuses at the fit
    and one over: validate says so (a warning: the file is valid)."""
    path = tmp_path / "gemma_past.yaml"
    path.write_text(GEMMA_PAST)
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-2] == (
        f"{path}:1: warning: fit_slack 1 is below the margin's round-up for gemma-2-2b: one "
        "block in each of its 2 attention groups (fit_slack: 2, and pool.above at least 2)"
    )
    # Issue 45: with none written, the default 0 refused the same cells, and nothing said so.
    path.write_text(replaced(GEMMA_PAST, ("fit_slack: 1\n", "")))
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-2] == (
        f"{path}:1: warning: fit_slack 0 (the default) is below the margin's round-up for "
        "gemma-2-2b: one block in each of its 2 attention groups (fit_slack: 2, and pool.above "
        "at least 2)"
    )
    # A case that records the round-up (fixed refuses), or writes 0, meant it.
    for meant in ("fit_slack: 1\n", "fit_slack: 0\n"):
        text = GEMMA_PAST.replace("fit_slack: 1\n", meant.replace("fit_slack: 1\n", ""))
        if meant.startswith("fit_slack: 1"):
            text += "expect: {fixed: not_admitted}\n"
        path.write_text(text)
        assert main(["validate", str(path)]) == 0
        assert "warning" not in capsys.readouterr().out
    path.write_text(replaced(GEMMA_PAST, ("fit_slack: 1", "fit_slack: 2")))
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        f"{path}:1: warning: [gemma_past] pool.above 1 stops inside fit_slack 2: every pool "
        "swept above the fit may be refused, so none has to finish and tightness reads "
        "unfinished; use above: 2 or more"
    )
