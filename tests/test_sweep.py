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

from matrix.baselines import read_baseline, write_baseline
from matrix.installed import installed_vllm_version
from tests.helpers import forked_main, needs_vllm

pytestmark = needs_vllm

CI_SHARDS = 8  # the class cells' files in this many shards: CI runs the first


def test_every_architecture_is_as_the_baseline_has_it(adapter: Any, tmp_path: Path) -> None:
    """The whole sweep, derived afresh (not the check cache's answer), matches the release's
    committed baseline: no traceback, no architecture missing, every class and reason."""
    done = forked_main(["sweep", "--no-cache", "--jobs", "2"], tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "as the vLLM" in done.stdout and "Traceback" not in done.stderr
    rows = read_baseline(installed_vllm_version() or "")
    assert rows is not None
    assert f"{len(rows)} architectures:" in done.stdout


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


def test_one_shard_of_the_class_cells_runs_green(adapter: Any, tmp_path: Path) -> None:
    """The first of the class cells' shards (whole files), as CI runs it: every cell as its
    class's rules expect."""
    args = ["sweep", "--cells", "--", "-n", "0", "--splits", str(CI_SHARDS), "--group", "1"]
    done = forked_main(args, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


# The six shipped models described by hand, against their architecture's default config's
# class on 0.33: docs/adding-a-model.md ("The default configs") says why each differs.
SHIPPED = {
    "gemma-3-27b": ("Gemma3ForCausalLM", "6x sliding_window/16/w1024 + full/16"),
    "nemotron-nano-9b-v2": ("NemotronHForCausalLM", "7x mamba/len/none + full/1312"),
    "granite-4.0-h-tiny": ("GraniteMoeHybridForCausalLM", "9x mamba/len/none + full/400"),
    "jamba-mini": ("JambaForCausalLM", "7x mamba/len/none + full/80"),
    "falcon-h1": ("FalconH1ForCausalLM", "mamba/len/none + full/1568"),
    "zamba2-2.7b": ("Zamba2ForCausalLM", "6x mamba/len/none + full/48"),
}
DEFAULT_CLASSES = {
    "Gemma3ForCausalLM": "6x sliding_window/16/w4096 + full/16",
    "NemotronHForCausalLM": "mamba/len/none + full/1040",
    "GraniteMoeHybridForCausalLM": "mamba/len/none",
    "JambaForCausalLM": "7x mamba/len/none + full/80",
    "FalconH1ForCausalLM": "mamba/len/none + full/144",
    "Zamba2ForCausalLM": "6x mamba/len/none + full/48",
}


@pytest.mark.skipif(installed_vllm_version() != "0.33.0", reason="the classes of 0.33.0")
def test_the_shipped_descriptions_against_their_default_configs(adapter: Any) -> None:
    from matrix.adapters.kv_cache import layout_for
    from matrix.case.layout_class import class_group, class_key
    from matrix.case.loading import read_model_file
    from matrix.case.model_paths import SHIPPED_MODELS
    from matrix.sweep.derive import SWEPT_LENGTH, _case

    baseline = {r.architecture: r.detail for r in read_baseline("0.33.0") or ()}
    for slug, (architecture, shipped) in SHIPPED.items():
        described = read_model_file(SHIPPED_MODELS / f"{slug}.yaml")
        assert described.architecture == architecture  # type: ignore[union-attr]
        layout = layout_for(_case(described, SWEPT_LENGTH))  # type: ignore[arg-type]
        groups = (
            class_group(g.kind, g.block_size, g.window, g.mamba_mode, SWEPT_LENGTH)
            for g in layout.groups
        )
        assert class_key(groups) == shipped, slug
        assert baseline[architecture] == DEFAULT_CLASSES[architecture], architecture


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
