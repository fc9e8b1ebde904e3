"""Described models: the file format, the collector's rule, and layouts derived by vLLM's code
checked against values worked out by hand from each model's numbers."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import pytest

from matrix.case.config_json import ConfigModel
from matrix.case.expansion import case_files, cells_from_file
from matrix.case.loading import CaseFileError, read_description
from matrix.case.model_paths import SHIPPED_MODELS as SHIPPED_DESCRIPTIONS
from matrix.case.model_paths import is_model_file, model_files, model_names, no_model
from tests.helpers import CASES, WriteCase, needs_vllm, replaced

TINY_MODEL = """\
source: a test's own numbers
architecture: LlamaForCausalLM
dtype: bfloat16
num_layers: 4
layer_pattern: [sliding_window, full]
num_kv_heads: 2
head_size: 64
sliding_window: 64
"""
MODEL_CASE = """\
name: tiny
model: tiny-model
max_model_len: 256
speculative: {method: eagle, num_tokens: 1}
pool: {below: 1, above: 1}
requests:
  - {id: a, prompt: {blocks: 2}}
expect: {none: stall, original: stall}
"""
SHIPPED = sorted(p.stem for p in SHIPPED_DESCRIPTIONS.glob("*.yaml"))


def test_every_slug_the_issue_lists_ships() -> None:
    assert set(SHIPPED) >= {
        "llama-3.1-8b",
        "gemma-3-27b",
        "gpt-oss-20b",
        "llama-4-scout",
        "deepseek-v3",
        "qwen3-next-80b-a3b",
        "nemotron-nano-9b-v2",
        "jamba-mini",
        "falcon-h1",
        # issue 19's: an alternating window, a Granite hybrid, a shared-attention hybrid, a
        # linear-attention hybrid and a sliding window in every layer
        "gemma-2-2b",
        "granite-4.0-h-tiny",
        "zamba2-2.7b",
        "kimi-linear-48b-a3b",
        "mistral-7b",
    }
    for slug in SHIPPED:
        assert read_description(SHIPPED_DESCRIPTIONS / f"{slug}.yaml").source.startswith("https://")


def test_nemotron_layers_follow_its_pattern() -> None:
    model = read_description(SHIPPED_DESCRIPTIONS / "nemotron-nano-9b-v2.yaml")
    pattern = model.hf_config["hybrid_override_pattern"]
    words = {"M": "mamba", "*": "full", "-": "no_cache"}
    assert model.layer_kinds() == tuple(words[c] for c in pattern)


def test_model_files_are_never_cases(tmp_path: Path) -> None:
    assert all(not is_model_file(path) for path in case_files(CASES))
    assert is_model_file(SHIPPED_DESCRIPTIONS / "gemma-3-27b.yaml")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tiny-model.yaml").write_text(TINY_MODEL)
    assert case_files(tmp_path) == []


def test_a_case_names_a_model_beside_it(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tiny-model.yaml").write_text(TINY_MODEL)
    (tmp_path / "tiny.yaml").write_text(MODEL_CASE)
    cells = cells_from_file(tmp_path / "tiny.yaml")
    assert len(cells) == 7
    described = cells[0].case.definition.described
    assert described is not None and described.sliding_window == 64


def test_a_yml_description_is_a_model_as_a_yaml_one_is(tmp_path: Path) -> None:
    """A ``models/`` folder is listed one way: validate, the name lookup and the did-you-mean
    all take a ``.yml`` description."""
    models = tmp_path / "models"
    models.mkdir()
    (models / "tiny-model.yml").write_text(TINY_MODEL)
    (models / "big").mkdir()
    (models / "big" / "config.json").write_text("{}")
    assert model_files(models) == [models / "big" / "config.json", models / "tiny-model.yml"]
    assert model_names(models) == ["big", "tiny-model"]
    (tmp_path / "tiny.yaml").write_text(MODEL_CASE)
    described = cells_from_file(tmp_path / "tiny.yaml")[0].case.definition.described
    assert described is not None and described.sliding_window == 64
    assert "did you mean 'tiny-model'?" in no_model("tiny-modle", tmp_path)


def problem(path: Path) -> CaseFileError:
    with pytest.raises(CaseFileError) as caught:
        cells_from_file(path)
    assert "\n" not in str(caught.value)
    return caught.value


def test_unknown_model_is_a_line_error(write_case: WriteCase) -> None:
    error = problem(write_case(replaced(MODEL_CASE, ("tiny-model", "tiny-modle"))))
    assert error.line == 2
    assert error.message.startswith("model: no model 'tiny-modle': 14 are shipped")
    beside = error.path.parent / "models"
    beside.mkdir()
    (beside / "tiny-model.yaml").write_text(TINY_MODEL)
    again = problem(error.path)
    assert again.message.startswith("model: no model 'tiny-modle': did you mean 'tiny-model'?")


@pytest.mark.parametrize(
    ("change", "line", "message"),
    [
        (("num_kv_heads: 2", "num_kv_heads: 0"), 6, "num_kv_heads: Input should be greater than 0"),
        (("full]", "fulll]"), 5, "layer_pattern.1: Input should be 'full'"),
        (
            ("sliding_window: 64\n", ""),
            5,
            "layer_pattern: has sliding_window layers, so 'sliding_window' is needed",
        ),
    ],
)
def test_impossible_numbers_name_the_model_file(
    tmp_path: Path, change: tuple[str, str], line: int, message: str
) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tiny-model.yaml").write_text(replaced(TINY_MODEL, change))
    (tmp_path / "tiny.yaml").write_text(MODEL_CASE)
    error = problem(tmp_path / "tiny.yaml")
    assert error.path == tmp_path / "models" / "tiny-model.yaml"
    assert error.line == line
    assert error.message.startswith(message)


def test_groups_and_a_described_model_exclude_each_other(write_case: WriteCase) -> None:
    text = (
        replaced(MODEL_CASE, ("tiny-model", "llama-3.1-8b"))
        + "groups: [{kind: full, block_size: 4}]\n"
    )
    assert problem(write_case(text)).message.startswith("groups: a model file's groups")


def test_model_as_a_matrix_axis(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tiny-model.yaml").write_text(TINY_MODEL)
    text = MODEL_CASE + "matrix:\n  model: {path: model, values: [tiny-model, llama-3.1-8b]}\n"
    (tmp_path / "tiny.yaml").write_text(text)
    cases = {
        cell.case.case_id: cell.case.definition for cell in cells_from_file(tmp_path / "tiny.yaml")
    }
    assert cases["tiny[model=tiny-model]"].described.num_layers == 4  # type: ignore[union-attr]
    shipped = cases["tiny[model=llama-3.1-8b]"].described
    assert isinstance(shipped, ConfigModel) and shipped.architecture == "LlamaForCausalLM"


@needs_vllm
def test_an_architecture_vllm_lacks_skips_with_the_reason(adapter: Any, tmp_path: Path) -> None:
    unknown = replaced(TINY_MODEL, ("LlamaForCausalLM", "NoSuchModelForCausalLM"))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tiny-model.yaml").write_text(unknown)
    (tmp_path / "tiny.yaml").write_text(MODEL_CASE)
    cell = cells_from_file(tmp_path / "tiny.yaml")[0]
    reason = adapter.unsupported(cell.case.definition)
    assert "does not know 'NoSuchModelForCausalLM'" in reason


# Hand-worked layouts -----------------------------------------------------------------------


def layout(slug: str, **settings: Any) -> dict[str, Any]:
    from matrix.tools.show_layout import derived

    options = {"tp": 1, "mamba_mode": "none", "spec_tokens": 0, "block_size": None}
    options |= {"max_model_len": 4096, "json": True, "model": slug, **settings}
    return derived(argparse.Namespace(**options))


def split(layers: int, most: int) -> list[int]:
    """``layers`` spread evenly over as few groups of at most ``most`` as hold them."""
    count = math.ceil(layers / most)
    return [layers // count + (1 if i < layers % count else 0) for i in range(count)]


def groups_of(report: dict[str, Any]) -> list[tuple[str, int, int]]:
    return [(g["kind"], g["layers"], g["block_size"]) for g in report["groups"]]


@needs_vllm
def test_gemma_3_27b_is_seven_groups(adapter: Any) -> None:
    # 62 layers, every sixth global: 52 sliding, 10 full. No group holds more layers than
    # the smallest kind has (10), so the 52 sliding layers spread over 6 groups.
    report = layout("gemma-3-27b")
    assert split(52, 10) == [9, 9, 9, 9, 8, 8]
    assert groups_of(report) == [("sliding_window", n, 16) for n in split(52, 10)] + [
        ("full", 10, 16)
    ]
    assert {g["window"] for g in report["groups"][:6]} == {1024}
    assert (report["scheduler_block_size"], report["hash_block_size"]) == (16, 16)


@needs_vllm
def test_gpt_oss_and_llama_groups(adapter: Any) -> None:
    # 24 layers alternating window 128 and full: two groups of 12 with the same page.
    assert groups_of(layout("gpt-oss-20b")) == [("sliding_window", 12, 16), ("full", 12, 16)]
    assert groups_of(layout("llama-3.1-8b")) == [("full", 32, 16)]
    assert groups_of(layout("llama-3.1-8b", block_size=32)) == [("full", 32, 32)]


def hybrid_block(state_bytes: int, attention_bytes_per_token: int, kernel: int = 16) -> int:
    """The smallest multiple of the kernel block whose attention page holds the state."""
    return kernel * math.ceil(state_bytes / (kernel * attention_bytes_per_token))


@needs_vllm
def test_nemotron_hybrid_block_size(adapter: Any) -> None:
    # Mamba2 state per layer: conv (conv_kernel - 1 + k) x (heads * head_dim + 2 * groups *
    # state) in bf16, and heads x head_dim x state in float32 (NemotronH's default SSM dtype).
    # Attention: K and V of 8 heads x 128 in bf16 per token.
    def state(k: int, tp: int = 1) -> int:
        conv = (4 - 1 + k) * (128 * 80 + 2 * 8 * 128) // tp * 2
        return conv + 128 // tp * 80 * 128 * 4

    per_token = 2 * 8 * 128 * 2
    assert hybrid_block(state(0), per_token) == 1312
    for k, mode in ((0, "none"), (3, "align")):
        report = layout("nemotron-nano-9b-v2", spec_tokens=k, mamba_mode=mode)
        block = hybrid_block(state(k), per_token)
        mamba_block = block if mode == "align" else 4096
        # 27 Mamba layers in groups of at most the 4 attention layers: 4, 4, 4, 4, 4, 4, 3.
        assert groups_of(report) == [("mamba", n, mamba_block) for n in split(27, 4)] + [
            ("full", 4, block)
        ]
        # vLLM's scheduler block is the LCM of the groups' (max_model_len for mode none).
        assert report["scheduler_block_size"] == math.lcm(block, mamba_block)
    # Tensor parallelism halves heads and state alike.
    tp2 = layout("nemotron-nano-9b-v2", tp=2)
    assert tp2["groups"][-1]["block_size"] == hybrid_block(state(0, 2), per_token // 2)


@needs_vllm
def test_jamba_hybrid_block_size(adapter: Any) -> None:
    # Mamba1 state: conv (d_conv - 1) x intermediate and intermediate x d_state, both bf16,
    # with intermediate = expand * hidden = 8192; one attention layer in eight.
    state = (4 - 1) * 8192 * 2 + 8192 * 16 * 2
    block = hybrid_block(state, 2 * 8 * 128 * 2)
    assert block == 80
    report = layout("jamba-mini", mamba_mode="align")
    assert groups_of(report) == [("mamba", 4, block)] * 7 + [("full", 4, block)]


@needs_vllm
def test_every_shipped_model_shows(adapter: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from matrix.__main__ import main

    for slug in SHIPPED:
        assert main(["show-layout", slug, "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["model"] == slug and report["groups"]
    assert main(["show-layout", "no-such-model"]) == 2
    assert capsys.readouterr().out.startswith("matrix show-layout: no model 'no-such-model'")


@needs_vllm
def test_alignment_port_matches_vllm(adapter: Any, tmp_path: Path) -> None:
    """The ported hybrid alignment gives what vLLM's own ``_align_hybrid_block_size`` gives on
    a VllmConfig built from the same model (Nemotron), with FlashAttention's kernel block."""
    vllm_block = vllm_aligned_block(tmp_path)
    assert layout("nemotron-nano-9b-v2", mamba_mode="align")["scheduler_block_size"] == vllm_block


def vllm_aligned_block(tmp_path: Path) -> int:
    from vllm.config import CacheConfig, DeviceConfig, ModelConfig, VllmConfig
    from vllm.model_executor.models import ModelRegistry
    from vllm.model_executor.models.nemotron_h import NemotronHForCausalLM
    from vllm.platforms.interface import Platform
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend

    model = read_description(SHIPPED_DESCRIPTIONS / "nemotron-nano-9b-v2.yaml")
    config = {**model.hf_config, "architectures": [model.architecture], "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    # Registered in this process, so vLLM inspects the class here rather than in a subprocess.
    ModelRegistry.register_model(model.architecture, NemotronHForCausalLM)
    model_config = ModelConfig(model=str(tmp_path), skip_tokenizer_init=True, max_model_len=4096)
    cache = CacheConfig(block_size=16, mamba_cache_mode="align", enable_prefix_caching=True)
    engine = VllmConfig(
        model_config=model_config, cache_config=cache, device_config=DeviceConfig("cpu")
    )
    engine.cache_config.block_size = 16  # what the engine picks for FlashAttention
    Platform._align_hybrid_block_size(engine, FlashAttentionBackend)
    return int(engine.cache_config.block_size)


@needs_vllm
def test_a_new_model_file_runs(inline: pytest.Pytester) -> None:
    """A contributor's model file in a temporary folder, named from a case there, collects and
    runs on the real scheduler."""
    inline.makefile(".ini", pytest="[pytest]\nmatrix_cases = cases\n")
    (inline.path / "cases" / "models").mkdir(parents=True)
    (inline.path / "cases" / "models" / "tiny-model.yaml").write_text(TINY_MODEL)
    (inline.path / "cases" / "tiny.yaml").write_text(MODEL_CASE)
    result = inline.runpytest_inprocess("-p", "no:cacheprovider", "--matrix-report=r.json")
    result.assert_outcomes(passed=7)
    cells = json.loads((inline.path / "r.json").read_text())["cells"]
    assert {c["model"] for c in cells} == {"tiny-model"}
    result.stdout.fnmatch_lines(["Model*", "tiny-model*"])


def test_validate_reads_model_folders(capsys: pytest.CaptureFixture[str]) -> None:
    from matrix.__main__ import main

    assert main(["validate", str(SHIPPED_DESCRIPTIONS)]) == 0
    *lines, summary = [
        line for line in capsys.readouterr().out.splitlines() if "vLLM is not" not in line
    ]
    files = len(SHIPPED) + len(list(SHIPPED_DESCRIPTIONS.glob("*/config.json")))
    assert summary == f"0 case files, {files} model files: ok"
    assert len(lines) == files
    assert all(line.endswith((": ok, a model description", "config.json")) for line in lines)
