from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent
CASES = REPO / "cases"
HAVE_VLLM = importlib.util.find_spec("vllm") is not None
needs_vllm = pytest.mark.skipif(not HAVE_VLLM, reason="vLLM is not installed (use tox -e tests)")


@pytest.fixture
def write_case(tmp_path: Path) -> Callable[[str, str], Path]:
    def write(text: str, name: str = "case.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture(scope="session")
def adapter():  # type: ignore[no-untyped-def]
    if not HAVE_VLLM:
        pytest.skip("vLLM is not installed")
    from matrix.adapters import select_adapter

    return select_adapter()
