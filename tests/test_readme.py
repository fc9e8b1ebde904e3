"""The README's example case is a real case: it loads and runs as its expectations say."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matrix.case.expansion import cells_from_file
from matrix.installed import installed_vllm_version
from matrix.judge.verdict import expectation_met
from matrix.releases import shipped_variant
from tests.helpers import REPO, needs_vllm, verdict_of


def readme_case() -> str:
    text = (REPO / "README.md").read_text()
    start = text.index("```yaml\nname: hybrid_swa") + len("```yaml\n")
    return text[start : text.index("```", start)]


def test_readme_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "hybrid_swa.yaml"
    path.write_text(readme_case())
    ids = [cell.test_id for cell in cells_from_file(path)]
    assert ids[:2] == ["hybrid_swa[k=1]-stock", "hybrid_swa[k=1]-none"]
    assert len(ids) == 14


@needs_vllm
def test_readme_example_runs_as_expected(adapter: Any, tmp_path: Path) -> None:
    path = tmp_path / "hybrid_swa.yaml"
    path.write_text(readme_case())
    for cell in cells_from_file(path, shipped_variant(installed_vllm_version())):
        verdict = verdict_of(adapter, cell)
        assert expectation_met(cell.expected, verdict), (cell.test_id, verdict.detail)
