"""``python -m matrix sweep`` on the installed vLLM, forked from this process (which imported
vLLM: the ``adapter`` fixture): every architecture in scope against the release's committed
baseline (what CI checks), a changed class in a baseline named, one shard of the class cells
run green, and the six hand-described shipped models against their architectures' default
config classes (docs/adding-a-model.md explains each difference)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from matrix.case.baselines import read_baseline, write_baseline
from matrix.case.layout_class import class_slug
from matrix.installed import installed_vllm_version
from tests.helpers import forked_main, needs_vllm

pytestmark = needs_vllm

CI_SHARDS = 24  # the class cells' files in this many shards: CI runs the first


@pytest.mark.parametrize("part", [1, 2])
def test_every_architecture_is_as_the_baseline_has_it(
    adapter: Any, tmp_path: Path, part: int
) -> None:
    """The whole sweep, derived afresh, in the two parts its workers take (a test each),
    matches the release's committed baseline: no traceback, no architecture missing, every
    class and reason."""
    from matrix.sweep.workers import CHUNKS

    assert CHUNKS == 2
    done = forked_main(["sweep", "--part", str(part)], tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "as the vLLM" in done.stdout and "Traceback" not in done.stderr
    rows = read_baseline(installed_vllm_version() or "")
    assert rows is not None
    half = (len(rows) + 1) // 2 if part == 1 else len(rows) // 2
    assert f"{half} architectures:" in done.stdout


def test_a_changed_class_fails_the_sweep_naming_it(adapter: Any, tmp_path: Path) -> None:
    rows = read_baseline(installed_vllm_version() or "")
    assert rows is not None
    edited = [
        replace(r, detail="full/32") if r.architecture == "OPTForCausalLM" else r for r in rows
    ]
    baseline = tmp_path / "baseline.tsv"
    write_baseline(baseline, edited)
    args = ["sweep", "--only", "OPTForCausalLM", "--baseline", str(baseline)]
    done = forked_main(args, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "OPTForCausalLM: was layout: full/32; now layout: full/16" in done.stdout


# CI runs one shard of the class cells on one release (0.33's suite; once: the 0.31 suite
# leaves it): tox -m sweep runs every class's cells on every release.
@pytest.mark.once
def test_one_shard_of_the_class_cells_runs_green(adapter: Any, tmp_path: Path) -> None:
    """The first of the class cells' shards (whole files), as CI runs it: every cell as its
    class's rules expect, under stock, the fix and the candidate (the other variants' cells
    run in tox -m sweep: CI's budget of 10 s a test)."""
    args = ["sweep", "--cells", "--", "-n", "0", "--splits", str(CI_SHARDS), "--group", "1"]
    args += ["-m", "stock or fixed or proposed"]
    done = forked_main(args, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


# The shipped models (a config.json or a description each) with their layout class on 0.33,
# and those whose architecture's default config gives another: docs/adding-a-model.md
# ("The default configs of the registry sweep") says why each differs.
SHIPPED = {
    "deepseek-v3": ("DeepseekV3ForCausalLM", "mla/16"),
    "falcon-h1": ("FalconH1ForCausalLM", "mamba/len/none + full/1568"),
    "gemma-2-2b": ("Gemma2ForCausalLM", "sliding_window/16/w4096 + full/16"),
    "gemma-3-27b": ("Gemma3ForCausalLM", "6x sliding_window/16/w1024 + full/16"),
    "gpt-oss-20b": ("GptOssForCausalLM", "sliding_window/16/w128 + full/16"),
    "granite-4.0-h-tiny": ("GraniteMoeHybridForCausalLM", "9x mamba/len/none + full/400"),
    "jamba-mini": ("JambaForCausalLM", "7x mamba/len/none + full/80"),
    "kimi-linear-48b-a3b": ("KimiLinearForCausalLM", "3x mamba/len/none + mla/1920"),
    "llama-3.1-8b": ("LlamaForCausalLM", "full/16"),
    "llama-4-scout": ("Llama4ForConditionalGeneration", "3x chunked_local/16/w8192 + full/16"),
    "mistral-7b": ("MistralForCausalLM", "sliding_window/16/w4096"),
    "nemotron-nano-9b-v2": ("NemotronHForCausalLM", "7x mamba/len/none + full/1312"),
    "qwen3-next-80b-a3b": ("Qwen3NextForCausalLM", "3x mamba/len/none + full/544"),
    "zamba2-2.7b": ("Zamba2ForCausalLM", "6x mamba/len/none + full/48"),
}
DEFAULT_DIFFERS = {
    "falcon-h1": "mamba/len/none + full/144",
    "gemma-3-27b": "6x sliding_window/16/w4096 + full/16",
    "granite-4.0-h-tiny": "mamba/len/none",
    # Its default leaves kv_lora_rank None, which the model asserts is set.
    "kimi-linear-48b-a3b": "kv_lora_rank is None, and vLLM's KimiLinearForCausalLM asserts",
    "nemotron-nano-9b-v2": "mamba/len/none + full/1040",
}


@pytest.mark.skipif(installed_vllm_version() != "0.33.0", reason="the classes of 0.33.0")
def test_the_shipped_models_against_their_default_configs(adapter: Any) -> None:
    from matrix.adapters.kv_cache import layout_for
    from matrix.case.layout_class import class_group, class_key
    from matrix.case.loading import read_model_file
    from matrix.case.model_paths import model_file, shipped_models
    from matrix.sweep.derive import SWEPT_LENGTH, _case

    assert sorted(SHIPPED) == shipped_models()
    baseline = {r.architecture: r.detail for r in read_baseline("0.33.0") or ()}
    for slug, (architecture, shipped) in SHIPPED.items():
        path = model_file(slug, None)
        assert path is not None
        described = read_model_file(path)
        assert described.architecture == architecture
        layout = layout_for(_case(described, SWEPT_LENGTH))  # type: ignore[arg-type]
        groups = (
            class_group(g.kind, g.block_size, g.window, g.mamba_mode, SWEPT_LENGTH)
            for g in layout.groups
        )
        assert class_key(groups) == shipped, slug
        assert baseline[architecture].startswith(DEFAULT_DIFFERS.get(slug, shipped)), slug


def test_a_model_file_is_checked_at_the_length_its_config_allows(
    adapter: Any, tmp_path: Path
) -> None:
    """A config allowing fewer positions than the check's 1024 (Whisper's 448) is checked at
    its own, not refused for the check's length."""
    import json

    from matrix.adapters.model_checks import check_model_file
    from matrix.case.shipped import ENGINE_CONFIGS

    config = json.loads((ENGINE_CONFIGS / "llama-tiny" / "config.json").read_text())
    folder = tmp_path / "short"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 448}))
    assert check_model_file(folder / "config.json").errors == []


def test_a_users_config_is_classed_as_the_sweep_classes_its_architecture(
    adapter: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``sweep --config``: a config.json the sweep's way (Gemma 2's, whose default config
    the baseline holds), the baseline's architectures of its class and its class cells named;
    asked again, answered from the check cache; a file that is no config.json: one line, 2.
    ``show-layout`` prints the same class for the same config."""
    from matrix.__main__ import main
    from matrix.case.shipped import shipped_cases

    monkeypatch.setenv("MATRIX_VLLM_CACHE", str(tmp_path / "cache"))
    config = shipped_cases() / "models" / "gemma-2-2b" / "config.json"
    baseline = {r.architecture: r for r in read_baseline(installed_vllm_version() or "") or ()}
    held = baseline["Gemma2ForCausalLM"]
    assert main(["sweep", "--config", str(config)]) == 0
    out, err = capsys.readouterr()
    assert "importing vLLM" in err
    first = out.splitlines()
    assert first[0] == (
        f"sweep: {config} (Gemma2ForCausalLM, model type gemma2): layout class {held.detail} "
        f"({class_slug(held.detail)})"
    )
    assert "Gemma2ForCausalLM" in first[1] and f"cells/{class_slug(held.detail)}.yaml" in first[2]
    assert main(["sweep", "--config", str(config)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == first and "importing vLLM" not in err  # kept
    assert main(["show-layout", str(config)]) == 0
    assert f"layout class {held.detail} ({class_slug(held.detail)})" in capsys.readouterr().out
    (tmp_path / "notes.txt").write_text("{}")
    assert main(["sweep", "--config", str(tmp_path / "notes.txt")]) == 2
    assert capsys.readouterr().err == (
        f"matrix sweep --config: {tmp_path / 'notes.txt'}:1: vLLM reads a folder's "
        "config.json: name the file so\n"
    )


def test_a_default_config_the_model_refuses_is_refused_not_a_layout(
    adapter: Any, tmp_path: Path
) -> None:
    """Issue 45 item 4: Kimi Linear's default config leaves kv_lora_rank None, which vLLM's
    ModelConfig reads as no MLA (``full/16``), yet the model asserts it is set for every
    attention layer. The shipped config.json, with its ranks, keeps its layout."""
    import json

    from matrix.adapters.config_json import ConfigJsonError, description
    from matrix.case.config_json import config_model
    from matrix.case.model_paths import SHIPPED_MODELS
    from matrix.sweep.derive import derive_row
    from matrix.sweep.scope import in_scope

    (kimi,) = [a for a in in_scope() if a.name == "KimiLinearForCausalLM"]
    row = derive_row(kimi, tmp_path)
    assert (row.status, row.model_type) == ("refused", "kimi_linear"), row
    assert row.detail.startswith(
        "kv_lora_rank is None, and vLLM's KimiLinearForCausalLM asserts kv_lora_rank is not "
        "None for its attention layers (vllm/"
    )
    shipped = SHIPPED_MODELS / "kimi-linear-48b-a3b" / "config.json"
    assert description(config_model(shipped))[0].mla is not None
    folder = tmp_path / "no_rank"
    folder.mkdir()
    config = json.loads(shipped.read_text())
    (folder / "config.json").write_text(json.dumps({**config, "kv_lora_rank": None}))
    with pytest.raises(ConfigJsonError, match="kv_lora_rank is None, and vLLM's"):
        description(config_model(folder / "config.json"))
