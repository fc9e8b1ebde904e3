from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import HAVE_VLLM, WriteCase

pytest_plugins = ["pytester"]
# Malformed case files that tests feed to the loader; never cases of this suite's own run
# (a folder named on the command line collects the case files under it).
collect_ignore = ["corpus"]


@pytest.fixture
def write_case(tmp_path: Path) -> WriteCase:
    def write(text: str, name: str = "case.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture(scope="session")
def adapter() -> Any:
    if not HAVE_VLLM:
        pytest.skip("vLLM is not installed")
    from matrix.adapters.selection import select_adapter

    return select_adapter()
