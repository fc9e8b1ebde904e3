from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import HAVE_VLLM, NO_VLLM, XDIST_RUN, WriteCase, verdict_of

pytest_plugins = ["pytester", "tests.cpu"]
# Malformed case files that tests feed to the loader; never cases of this suite's own run
# (a folder named on the command line collects the case files under it).
collect_ignore = ["corpus"]

# Cells of each shape the in-process runs use: synchronous and asynchronous, EAGLE and ngram,
# sliding window, Mamba and a described model, so that every vLLM module a run imports is
# imported before one.
WARM_CASE = """\
name: warm
groups:
  - {kind: full, block_size: 4}
  - {kind: sliding_window, block_size: 4, window: 8}
speculative: {method: eagle, num_tokens: 1}
pool: 24
requests:
  - {id: a, prompt: 16}
variants: [stock]
matrix:
  method: {path: speculative.method, values: [eagle, ngram]}
  sched: {path: engine.async_scheduling, values: [false, true]}
"""
WARM_MAMBA = """\
name: warm_mamba
groups:
  - {kind: full, block_size: 4}
  - {kind: mamba, block_size: 4, mamba_mode: align}
pool: 24
requests:
  - {id: a, prompt: 16}
variants: [stock]
"""
WARM_MODEL = """\
name: warm_model
model: llama-3.1-8b
max_model_len: 256
pool: {below: 0, above: 0}
requests:
  - {id: a, prompt: {blocks: 2}}
variants: [stock]
"""
WARM = {"warm": WARM_CASE, "warm_mamba": WARM_MAMBA, "warm_model": WARM_MODEL}


@pytest.fixture
def write_case(tmp_path: Path) -> WriteCase:
    def write(text: str, name: str = "case.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture(autouse=True)
def pictures_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test sees pictures as a user does, whatever CI's runs set (MATRIX_PICTURES)."""
    from matrix.report.gallery import SWITCH

    monkeypatch.delenv(SWITCH, raising=False)


@pytest.fixture(scope="session")
def adapter() -> Any:
    if not HAVE_VLLM:
        pytest.skip(NO_VLLM)
    from matrix.adapters.selection import select_adapter

    return select_adapter()


@pytest.fixture(scope="session")
def warm_vllm(adapter: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """vLLM imported and cells of every shape run in this process. pytester's in-process runs
    drop the modules they imported when they end, and vLLM's registers torch operators, which
    a second import would register twice: a run that imports nothing new is safe. A picture is
    drawn for the same reason (matplotlib's classes, kept by modules that outlive the run)."""
    from matrix.case.expansion import cells_from_file
    from matrix.report.gallery import available

    if available():  # matplotlib too: imported afresh after a run, its classes would be twice
        from matrix.report.figures import svg

        svg(lambda figure, cells, release: figure.add_subplot(), [], "warm")
    folder = tmp_path_factory.mktemp("warm")
    for name, text in WARM.items():
        (folder / f"{name}.yaml").write_text(text)
        for cell in cells_from_file(folder / f"{name}.yaml"):
            if not adapter.unsupported(cell.case.definition):
                verdict_of(adapter, cell)


@pytest.fixture(scope="session")
def xdist_shard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of :data:`XDIST_RUN` on one xdist worker, for the tests that read it. xdist
    starts its workers as fresh interpreters, each importing vLLM again (seconds): one run is
    shared rather than one a test."""
    if not HAVE_VLLM:
        pytest.skip(NO_VLLM)
    folder = tmp_path_factory.mktemp("xdist")
    report = folder / "vllm.shard-1-of-2.json"
    command = [sys.executable, "-m", "pytest", "-q", "-n", "1", *XDIST_RUN]
    from matrix.report.gallery import SWITCH

    # Pictures as a user sees them, as the tests reading the run have them (pictures_on).
    environment = {name: value for name, value in os.environ.items() if name != SWITCH}
    done = subprocess.run(
        [*command, f"--matrix-report={report}"],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return report


@pytest.fixture
def inline(pytester: pytest.Pytester, warm_vllm: None) -> pytest.Pytester:
    """A pytester for ``runpytest_inprocess`` runs of the matrix (a second or so each, where a
    subprocess pays vLLM's import again)."""
    return pytester


# Fixtures that bring vLLM: a test using one drives the installed release.
VLLM_FIXTURES = frozenset({"adapter", "warm_vllm", "inline", "xdist_shard"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: a test of many seconds, started first")
    config.addinivalue_line(
        "markers",
        "vllm: drives the installed vLLM (set by needs_vllm and the vLLM fixtures): run on "
        "every release's env; a test without it is the same on every release and runs on one",
    )
    config.addinivalue_line(
        "markers",
        "once: drives vLLM, but is the same on every release (pytest and xdist plumbing): the "
        "0.31 suite leaves it to the 0.33 one",
    )
    config.addinivalue_line(
        "markers",
        "heavy: starts several interpreters that each import a vLLM of their own (bisect over "
        "the releases): over CI's budget of a test, run by tox -e heavy",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks the tests that drive vLLM (skipped without it); then the slow ones first: under
    xdist they start at once on different workers, and the short ones fill in around them,
    instead of a slow one starting last."""
    for item in items:
        if VLLM_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker("vllm")
        if not HAVE_VLLM and item.get_closest_marker("vllm"):
            item.add_marker(pytest.mark.skip(reason=NO_VLLM))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
