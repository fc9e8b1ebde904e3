"""Where the package's shipped files are: the package itself, its engine configs, and the
shipped case files (``matrix/cases`` in an installed wheel, where pyproject.toml puts them with
the model descriptions, else the ``cases/`` folder beside the package in a checkout)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent
# The engine's HF config directories (a tiny config.json each, for vLLM's ModelConfig).
ENGINE_CONFIGS = PACKAGE / "models"
# In a clone of this repository (not in a wheel): the findings' case files and unit tests, and
# their fixes as patches to vLLM (a folder per release, a patch per fix).
FINDINGS = PACKAGE.parent / "docs" / "findings"
PATCHES = FINDINGS / "patches"
# In a clone: the connector axis's case files (python -m matrix connectors, docs/connectors.md).
CONNECTOR_CASES = PACKAGE.parent / "connector_cases"
# In a clone: the cases of behaviours the table cases do not reach, and of decisions at the
# pools where they flip (python -m matrix adequacy, docs/cases.md); beyond the main job's
# budget, they run in their own envs and count among the matrix's stock cells for mutants.
ADEQUACY_CASES = PACKAGE.parent / "adequacy_cases"
# A suite: a folder of case files run as one (``run``, ``connectors``, ``adequacy``, ``sweep
# --cells``); its name prefixes its reports' (``connectors-vllm-0.33.0.json``); the shipped
# cases' is "".
SUITES = ("", "connectors", "adequacy", "sweep")


def shipped_cases() -> Path:
    """The folder of shipped case files."""
    packaged = PACKAGE / "cases"
    return packaged if packaged.is_dir() else PACKAGE.parent / "cases"
