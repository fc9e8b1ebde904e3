"""What ``validate`` and ``show-layout`` keep of vLLM's answers (``matrix.tools.check_cache``): an
unchanged file checked again answers without importing vLLM, an edited one is checked again,
and a corrupt entry is a miss, never a traceback. The first answers are made once per module,
in this process, which has vLLM imported (the ``adapter`` fixture), into a temporary cache."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from matrix.__main__ import main
from matrix.tools import check_store
from tests.helpers import CASES, REPO, needs_vllm, replaced

pytestmark = needs_vllm

CASE = """\
name: cached
model: tiny
max_model_len: 256
pool: {below: 0, above: 0}
requests:
  - {id: a, prompt: {blocks: 2}}
variants: [stock]
"""
IMPORTING = "importing vLLM"


@dataclass(frozen=True)
class Filled:
    """A case and its model in a folder, and a cache holding what vLLM answered for them."""

    folder: Path
    model: Path  # the model's config.json
    cache: Path  # what MATRIX_VLLM_CACHE names
    validate_out: str
    show_out: str


def show_args(model: Path) -> list[str]:
    return ["show-layout", str(model), "--spec-tokens", "1", "--json"]


def called(args: list[str]) -> tuple[int, str, str]:
    """``python -m matrix ARGS`` in this process: its exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def filled(adapter: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Filled]:
    folder = tmp_path_factory.mktemp("cached")
    (folder / "case.yaml").write_text(CASE, encoding="utf-8")
    model = folder / "models" / "tiny" / "config.json"
    model.parent.mkdir(parents=True)
    shutil.copy(CASES / "models" / "llama-3.1-8b" / "config.json", model)
    cache = folder / "cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MATRIX_VLLM_CACHE", str(cache))
        code, validate_out, err = called(["validate", str(folder)])
        assert code == 0 and IMPORTING in err, validate_out + err
        code, show_out, err = called(show_args(model))
        assert code == 0 and IMPORTING in err, show_out + err
        yield Filled(folder, model, cache, validate_out, show_out)


@pytest.fixture
def cache_copy(filled: Filled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The filled cache's entries, copied into this test's cache (MATRIX_VLLM_CACHE)."""
    cache = tmp_path / "cache"
    shutil.copytree(filled.cache, cache)
    monkeypatch.setenv("MATRIX_VLLM_CACHE", str(cache))
    return cache


def entries(cache: Path) -> list[Path]:
    found = sorted(cache.glob(f"*/{check_store.ENTRIES}/*.json"))
    assert found, f"no entries under {cache}"
    return found


@pytest.mark.once
def test_a_second_check_of_an_unchanged_file_does_not_import_vllm(filled: Filled) -> None:
    """Needs a fresh process, as a user's second call is: one that has not imported vLLM."""
    second = (
        "import sys\n"
        "from matrix.__main__ import main\n"
        "codes = [main(['validate', sys.argv[1]]), main(sys.argv[2:])]\n"
        "assert 'vllm' not in sys.modules, 'vLLM was imported'\n"
        "print(codes)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", second, str(filled.folder), *show_args(filled.model)],
        cwd=REPO,
        env={**os.environ, "MATRIX_VLLM_CACHE": str(filled.cache)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == f"{filled.validate_out}{filled.show_out}[0, 0]\n"
    assert IMPORTING not in done.stderr


def test_an_edited_file_is_checked_again(
    filled: Filled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model's content is the key, at the same path: its config.json, a file beside it,
    and a case's own settings (then only its layout is derived again)."""
    folder = tmp_path / "edited"
    shutil.copytree(filled.folder, folder, ignore=shutil.ignore_patterns("cache"))
    monkeypatch.setenv("MATRIX_VLLM_CACHE", str(tmp_path / "cache"))
    model = folder / "models" / "tiny" / "config.json"

    def layers() -> tuple[int, bool]:
        code, out, err = called(show_args(model))
        assert code == 0, out + err
        return json.loads(out)["groups"][0]["layers"], IMPORTING in err

    assert layers() == (32, True)
    assert layers() == (32, False)
    model.write_text(
        replaced(model.read_text(), ('"num_hidden_layers": 32', '"num_hidden_layers": 16'))
    )
    assert layers() == (16, True)
    beside = model.parent / "SOURCE"  # vLLM reads the folder: its other files count too
    beside.write_text("a source\n")
    assert layers() == (16, True)
    assert layers() == (16, False)
    beside.write_text("another source\n")
    assert layers() == (16, True)

    def validate_imports() -> str:
        code, out, err = called(["validate", str(folder)])
        assert code == 0, out + err
        return err

    assert IMPORTING in validate_imports()
    assert validate_imports() == ""
    case = folder / "case.yaml"
    case.write_text(replaced(case.read_text(), ("max_model_len: 256", "max_model_len: 512")))
    said = validate_imports()
    assert "to read 0 model files and derive 1 model case layout" in said
    assert re.search(r"imported in \d+\.\d s\n$", said), said


def test_show_layout_of_a_file_validate_just_read_needs_no_import(
    filled: Filled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``validate`` naming a config.json imports vLLM to read it, and keeps ``show-layout``'s
    report for its default options: ``show-layout`` then answers without an import, the
    sweep's layout class included."""
    monkeypatch.setenv("MATRIX_VLLM_CACHE", str(tmp_path / "cache"))
    code, out, err = called(["validate", str(filled.model)])
    assert code == 0 and IMPORTING in err, out + err
    code, out, err = called(["show-layout", str(filled.model)])
    assert code == 0 and err == "", err
    assert out.endswith("layout class full/16 (full16)\n"), out


def _garbage(text: str) -> str:
    return "\x00\ufffd not JSON"


def _truncated(text: str) -> str:
    return text[: len(text) // 2]


def _nested(text: str) -> str:
    return "[" * 100_000


def _too_large(text: str) -> str:
    return " " * check_store.MAX_ENTRY + text


def _another_question(text: str) -> str:
    stored = json.loads(text)
    return json.dumps({**stored, "question": stored["question"].replace("tiny", "other")})


def _another_shape(text: str) -> str:
    # Every field as a string ("32" for 32): pydantic's strict mode refuses, never converts.
    stored = json.loads(text)
    answer = {key: str(value) for key, value in json.loads(stored["answer"]).items()}
    return json.dumps({**stored, "answer": json.dumps(answer)})


CORRUPTIONS = {
    "garbage": _garbage,
    "truncated": _truncated,
    "nested": _nested,
    "too-large": _too_large,
    "another-question": _another_question,
    "another-shape": _another_shape,
    "fifo": None,
}


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_a_corrupt_entry_is_a_miss(filled: Filled, cache_copy: Path, corruption: str) -> None:
    """Every entry spoilt (a FIFO in its place: read without blocking): show-layout imports
    vLLM again, prints what it printed first, and its entries are whole again after."""
    corrupt = CORRUPTIONS[corruption]
    for entry in entries(cache_copy):
        if corrupt is None:
            entry.unlink()
            os.mkfifo(entry)
        else:
            entry.write_text(corrupt(entry.read_text()))
    code, out, err = called(show_args(filled.model))
    assert (code, out) == (0, filled.show_out)
    assert IMPORTING in err and "Traceback" not in err
    code, out, err = called(show_args(filled.model))
    assert (code, out, err) == (0, filled.show_out, "")


def test_a_vllm_checkout_is_never_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its files change under one commit and version: nothing would say an answer is stale."""
    from matrix.installed import Source

    checkout = Source("/src/vllm", "checkout", "0" * 40, False)
    monkeypatch.setattr(check_store, "installed_source", lambda: checkout)
    assert check_store.installed_fingerprint.__wrapped__() is None
