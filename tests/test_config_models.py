"""Models named by their config.json: the shipped files are the public ones (with their
source), vLLM's reading of each gives the layout its description gives, on every device and
setting; a case names one by its folder or its path; the engine's stand-in takes a long
context; and what a new user hit (LFM2, /etc, MLA on a CPU, a dropped architecture, a bad
--escalate file, --tp 0) is a line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from matrix.__main__ import main
from matrix.architectures import dropped, known_to, last_release_with, recorded
from matrix.case.config_json import ConfigModel
from matrix.case.expansion import cells_from_file
from matrix.case.loading import CaseFileError
from matrix.case.model_paths import SHIPPED_MODELS
from matrix.installed import installed_vllm_version
from matrix.releases import RELEASES
from tests.helpers import needs_vllm, replaced

CONFIGS = sorted(p.parent.name for p in SHIPPED_MODELS.glob("*/config.json"))
# Settings the two readings must agree on: tensor parallelism, both Mamba modes, speculative
# tokens (the Mamba state grows with them) and every device profile.
SETTINGS: list[dict[str, Any]] = [
    {},
    {"tp": 2},
    {"tp": 8, "spec_tokens": 1},
    {"mamba_mode": "align", "spec_tokens": 3},
    {"device": "sm90", "mamba_mode": "align"},
    {"device": "sm100", "spec_tokens": 7},
    {"device": "cpu"},
    {"block_size": 64, "max_model_len": 8192},
]


def test_each_shipped_config_is_a_public_file_with_its_source() -> None:
    assert len(CONFIGS) >= 8
    for slug in CONFIGS:
        folder = SHIPPED_MODELS / slug
        data = json.loads((folder / "config.json").read_text())
        assert data["architectures"] and "model_type" in data
        source = (folder / "SOURCE").read_text()
        assert "https://huggingface.co/" in source and "github.com/" in source
        # Every shipped model keeps its description: the cross-check below reads both.
        assert (SHIPPED_MODELS / f"{slug}.yaml").is_file()


def layout_or_refusal(model: str, settings: dict[str, Any]) -> Any:
    from matrix.tools.show_layout import derived

    options = {"tp": 1, "mamba_mode": "none", "spec_tokens": 0, "block_size": None}
    options |= {"max_model_len": 4096, "json": True, "device": "sm80", "model": model}
    try:
        report = derived(argparse.Namespace(**(options | settings)))
    except Exception as error:  # a refusal (MLA on a CPU) must be the same refusal
        return f"{type(error).__name__}: {error}"
    report.pop("model")
    return report


@needs_vllm
@pytest.mark.parametrize("slug", CONFIGS)
def test_a_config_json_gives_its_descriptions_layout(adapter: Any, slug: str) -> None:
    """Issue 27 item 1: vLLM's reading of the public config.json and the hand-copied
    description derive the same groups, block sizes and windows."""
    for settings in SETTINGS:
        from_config = layout_or_refusal(slug, settings)
        from_description = layout_or_refusal(f"{slug}.yaml", settings)
        assert from_config == from_description, settings


@needs_vllm
def test_a_multimodal_config_is_read_as_its_text_model(adapter: Any) -> None:
    from matrix.adapters.config_json import description

    path = SHIPPED_MODELS / "llama-4-scout" / "config.json"
    assert json.loads(path.read_text())["architectures"] == ["Llama4ForConditionalGeneration"]
    model, _ = description(cells_model(path))
    assert model.architecture == "Llama4ForCausalLM"
    assert model.layer_kinds().count("chunked_local") == 36
    assert model.attention_chunk_size == 8192


def cells_model(path: Path) -> ConfigModel:
    from matrix.case.config_json import config_model

    return config_model(path)


CASE = """\
name: by_path
model: {model}
max_model_len: {length}
speculative: {{method: eagle, num_tokens: 3}}
pool: {{below: 1, above: 2}}
fit_slack: 1
requests:
  - {{id: a, prompt: {{blocks: 40, offset: 1}}}}
variants: [stock, proposed]
"""


def test_a_case_names_a_config_json_by_its_path(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "config.json").write_text((SHIPPED_MODELS / "mistral-7b/config.json").read_text())
    (tmp_path / "case.yaml").write_text(CASE.format(model="mine/config.json", length=4096))
    described = cells_from_file(tmp_path / "case.yaml")[0].case.definition.described
    assert isinstance(described, ConfigModel)
    assert described.path == str(folder / "config.json")
    assert described.architecture == "MistralForCausalLM"
    (tmp_path / "case.yaml").write_text(CASE.format(model="other/config.json", length=4096))
    with pytest.raises(CaseFileError) as caught:
        cells_from_file(tmp_path / "case.yaml")
    assert caught.value.line == 2 and caught.value.message.startswith("model: no file")


def test_a_duplicate_key_is_named_by_its_path_at_its_second_line(tmp_path: Path) -> None:
    """The second ``model_type`` in ``text_config`` is the duplicate, not the first, nor the
    top-level one of the same name."""
    from matrix.case.config_json import read_config_json

    path = tmp_path / "config.json"
    path.write_text(
        '{\n  "architectures": ["LlavaForConditionalGeneration"],\n  "model_type": "llava",\n'
        '  "text_config": {\n    "model_type": "llama",\n    "hidden_size": 4096,\n'
        '    "model_type": "mistral"\n  }\n}\n'
    )
    with pytest.raises(CaseFileError) as caught:
        read_config_json(path)
    assert caught.value.line == 7
    assert caught.value.message == "duplicate key 'text_config.model_type'"


@pytest.mark.parametrize("model", ["/etc", "/proc/self", "."])
def test_a_directory_without_a_config_is_no_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    monkeypatch.chdir(tmp_path)  # "." is a directory without a config.json
    text = "name: x\nmodel: {}\ngroups: [{{kind: full, block_size: 4}}]\npool: 8\n"
    (tmp_path / "case.yaml").write_text(text.format(model) + "requests: [{id: a, prompt: 8}]\n")
    with pytest.raises(CaseFileError) as caught:
        cells_from_file(tmp_path / "case.yaml")
    assert caught.value.line == 2
    assert caught.value.message.endswith("is a directory without a config.json: not a model")


@needs_vllm
def test_a_long_context_runs(inline: pytest.Pytester) -> None:
    """Issue 27 item 4: max_model_len over the engine stand-in's 4096 ran into vLLM's
    ModelConfig in every cell; 8192 is ordinary, for a config.json model and written groups."""
    inline.makefile(".ini", pytest="[pytest]\nmatrix_cases = cases\n")
    (inline.path / "cases").mkdir()
    model = CASE.format(model="llama-3.1-8b", length=8192)
    long_prompt = model.replace("prompt: {blocks: 40, offset: 1}", "prompt: 6000")
    (inline.path / "cases" / "long.yaml").write_text(long_prompt.replace("by_path", "long"))
    groups = replaced(
        CASE.format(model="llama-tiny", length=8192),
        ("name: by_path", "name: long_groups\ngroups: [{kind: full, block_size: 16}]"),
        ("prompt: {blocks: 40, offset: 1}", "prompt: 6000"),
    )
    (inline.path / "cases" / "long_groups.yaml").write_text(groups)
    result = inline.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)


# LFM2: its short-convolution state is read by vLLM from conv_dim, which transformers'
# Lfm2Config does not declare (a test model's numbers, not a released model's).
LFM2 = """\
source: a test's own numbers
architecture: Lfm2ForCausalLM
dtype: bfloat16
num_layers: 4
layer_pattern: [mamba, mamba, full, mamba]
num_kv_heads: 8
head_size: 64
hf_config:
  model_type: lfm2
  hidden_size: 512
  num_hidden_layers: 4
  num_attention_heads: 8
  num_key_value_heads: 8
  layer_types: [conv, conv, full_attention, conv]
  conv_L_cache: 3
  conv_dim: 512
"""
LFM2_CASE = """\
name: lfm2
model: lfm2-test
pool: {below: 1, above: 1}
requests:
  - {id: a, prompt: {blocks: 2}}
variants: [stock, proposed]
"""


@pytest.fixture(scope="session")
def lfm2_class(adapter: Any) -> None:
    """vLLM's LFM2 module imported before any pytester run: one imported inside a run is
    dropped from sys.modules after it, and importing it again registers its op twice."""
    from vllm.model_executor.models import ModelRegistry

    ModelRegistry.models["Lfm2ForCausalLM"].load_model_cls()


def lfm2_folder(tmp_path: Path, model: str) -> Path:
    (tmp_path / "models").mkdir(exist_ok=True)
    (tmp_path / "models" / "lfm2-test.yaml").write_text(model)
    (tmp_path / "lfm2.yaml").write_text(LFM2_CASE)
    return tmp_path


@needs_vllm
def test_lfm2_passes_validate_and_runs(
    lfm2_class: None, inline: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27 item 4: with conv_dim LFM2 ran but validate refused the key; without it
    validate said ok and every cell failed with a traceback. Now one file passes both."""
    folder = lfm2_folder(inline.path, LFM2)
    assert main(["validate", str(folder)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 case file, 1 model file: ok"
    inline.makefile(".ini", pytest="[pytest]\nmatrix_cases = lfm2.yaml\n")
    inline.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)


@needs_vllm
def test_lfm2_without_conv_dim_is_one_line(
    adapter: Any, lfm2_class: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = lfm2_folder(tmp_path, replaced(LFM2, ("  conv_dim: 512\n", "")))
    assert main(["validate", str(folder)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert f"{folder}/models/lfm2-test.yaml:8: hf_config: vLLM's Lfm2ForCausalLM reads " in (
        "\n".join(lines)
    )
    assert "'conv_dim' for its Mamba state, and the config has no such key" in "\n".join(lines)
    reason = adapter.unsupported(cells_from_file(folder / "lfm2.yaml")[0].case.definition)
    assert "\n" not in reason and "conv_dim" in reason


@needs_vllm
def test_validate_checks_a_model_folder_no_case_uses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "unused.yaml").write_text(
        replaced(LFM2, ("num_kv_heads: 8", "num_kv_head: 8"))
    )
    assert main(["validate", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{tmp_path}/models/unused.yaml:6: num_kv_head: not a key of a model file: did you mean "
        "'num_kv_heads'?",
        "0 case files, 1 model file: 1 problem",
    ]


MLA_ON_CPU = """\
name: mla_cpu
model: {model}
layout: {{device: cpu}}
pool: {{below: 1, above: 1}}
requests:
  - {{id: a, prompt: {{blocks: 2}}}}
"""


@needs_vllm
@pytest.mark.parametrize("model", ["deepseek-v3", "deepseek-v3.yaml"])
def test_validate_refuses_mla_on_a_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str
) -> None:
    """Issue 27 item 4: validate said ok, then the run refused the layout."""
    path = tmp_path / "mla.yaml"
    path.write_text(MLA_ON_CPU.format(model=model))
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}:3: [mla_cpu] layout.device: device cpu: vLLM's CPU platform turns" in out


def test_the_architectures_of_each_release_are_recorded() -> None:
    releases = list(recorded())
    assert {f"{release}.0" for release in RELEASES} <= set(releases)
    assert last_release_with("MedusaModel") == "0.32.0"
    assert dropped("MedusaModel", "0.33.0") == (
        f"vLLM 0.32.0 was the last release with it (of the recorded {releases[0]}-{releases[-1]})"
    )
    assert dropped("MedusaModel", "0.32.0") is None  # the installed release still has it


@needs_vllm
def test_the_installed_releases_record_is_its_registry(adapter: Any) -> None:
    """The table is generated (python -m matrix.tools.record_architectures), not written."""
    from matrix.adapters.registry import known_architectures

    recorded_here = known_to(installed_vllm_version())
    if recorded_here is None:
        pytest.skip(f"vLLM {installed_vllm_version()} is not recorded (a dev build)")
    assert recorded_here == known_architectures()


def test_a_model_vllm_lacks_is_not_a_misspelling() -> None:
    """Issue 27 item 4: BambaForCausalLM got "did you mean 'MambaForCausalLM'?"."""
    from matrix.adapters.registry import unknown_architecture

    known = frozenset({"MambaForCausalLM", "LlamaForCausalLM"})
    message = unknown_architecture("BambaForCausalLM", known, "0.33.0")
    assert "did you mean" not in message
    assert message.startswith("the installed vLLM has no 'BambaForCausalLM': transformers has")
    misspelt = unknown_architecture("LlamaForCausalLMM", known, "0.33.0")
    assert misspelt.endswith("did you mean 'LlamaForCausalLM'?")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (None, "cannot read: No such file or directory"),
        ("name: [", "invalid YAML"),
        ("just text\n", "a case file is a mapping"),
    ],
)
def test_escalate_checks_its_file_before_importing_vllm(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    text: str | None,
    says: str,
) -> None:
    """Issue 27 item 4: a traceback after 20-50 s of vLLM's import; a non-finding ran."""
    path = tmp_path / "finding.yaml"
    if text is not None:
        path.write_text(text)
    monkeypatch.setitem(sys.modules, "matrix.explore.search", None)  # importing it fails
    monkeypatch.setitem(sys.modules, "matrix.run.cell", None)  # and so does running a cell
    assert main(["explore", "--escalate", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("matrix explore --escalate: ") and says in err[0]


PASSING = """\
name: fine
groups: [{kind: full, block_size: 4}]
speculative: {method: eagle, num_tokens: 1}
pool: {start: 8, stop: 10}
requests: [{id: a, prompt: 16}]
"""


@needs_vllm
def test_escalating_a_case_that_passes_says_it_is_no_finding(
    adapter: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 27 item 4: a case that is not a finding ran the search and exited 0."""
    path = tmp_path / "fine.yaml"
    path.write_text(PASSING)
    monkeypatch.setitem(sys.modules, "matrix.explore.search", None)  # the search never starts
    assert main(["explore", "--escalate", str(path), "--variant", "fixed"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "Triton" not in line]
    assert err == [
        f"matrix explore --escalate: {path}: not a finding on vLLM {installed_vllm_version()} "
        "under fixed: its 1 cell(s) pass, so there is no failure to escalate"
    ]


@pytest.mark.parametrize(
    ("option", "says"),
    [
        (["--tp", "0"], "--tp: Input should be greater than or equal to 1"),
        (["--max-model-len", "8"], "--max-model-len: Input should be greater than or equal"),
        (
            ["--max-model-len", "2000000"],
            "--max-model-len: 2,000,000 tokens, over the limit of 1,048,576\n",
        ),
    ],
)
def test_show_layout_names_a_refused_option(
    capsys: pytest.CaptureFixture[str], option: list[str], says: str
) -> None:
    """The option, not the case key the option becomes; a limit the option cannot raise is
    said without a case file's ``limits:``."""
    assert main(["show-layout", "llama-3.1-8b", *option]) == 2
    assert capsys.readouterr().out.startswith(f"matrix show-layout: {says}")


def test_show_layout_reads_a_model_file_that_is_not_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model file that links to /dev/zero is there, so it is no "no model": it is read, and
    refused as what it is."""
    linked = tmp_path / "zero.yaml"
    linked.symlink_to("/dev/zero")
    assert main(["show-layout", str(linked)]) == 2
    out = capsys.readouterr().out
    refusal = "cannot read: a character device, not a regular file"
    assert out == f"matrix show-layout: {linked}:1: {refusal}\n"
