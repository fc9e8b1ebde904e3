"""The on-disk store behind ``matrix.tools.check_cache``: one JSON file per question to the
installed vLLM, in ``matrix-checks/`` under the release's cache root
(``matrix.installed.vllm_cache_root``: ``~/.cache/vllm-kv-matrix/vllm-<version>``), named by the
digest of everything its answer depends on: the installed vLLM (its distribution, version and
``RECORD``, the digest of every file it installed), transformers', torch's and Python's
versions, the matrix code and data files, the question itself and the content of the files vLLM
reads for the model (a description; a config.json's whole folder). A vLLM installed from a
checkout is never cached: its files change under one commit.

Entries are written whole (a temporary file renamed over the entry), read bounded (a regular
file of at most :data:`MAX_ENTRY` bytes, never blocking), and one that does not parse, answers
another question or holds another shape is a miss, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import stat
import tempfile
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TypeVar

from pydantic import TypeAdapter

from matrix.case.config_json import CONFIG_JSON
from matrix.case.shipped import ENGINE_CONFIGS, PACKAGE
from matrix.installed import installed_distribution, installed_source, vllm_cache_root
from matrix.report.info import matrix_digest

ENTRIES = "matrix-checks"
MAX_ENTRY = 1 << 20  # bytes: an answer is a few hundred
MAX_ENTRIES = 4096  # in the folder; beyond it the oldest half goes (stale code, edited files)
MAX_MODEL_FILES = 64  # in a config.json's folder: more is no model folder, and is not cached
MAX_MODEL_BYTES = 16 << 20  # all of them together

T = TypeVar("T")


@dataclass(frozen=True)
class Question:
    """One question to the installed vLLM: its kind, what it is asked of, and its entry."""

    kind: str
    material: str  # canonical JSON of the question and the model files' digest
    entry: Path

    def answer(self, adapter: TypeAdapter[T]) -> T | None:
        """The stored answer, or None: absent, unreadable, another question's, another shape."""
        data = read_bounded(self.entry, MAX_ENTRY)
        if data is None:
            return None
        try:
            stored = json.loads(data)
            if not isinstance(stored, dict) or stored.get("question") != self.material:
                return None
            answer = stored.get("answer")
            return adapter.validate_json(answer, strict=True) if isinstance(answer, str) else None
        except (ValueError, RecursionError):  # JSON's and pydantic's errors are ValueErrors
            return None

    def keep(self, answer: object) -> None:
        """Stores the answer: written beside the entry, then renamed over it; a cache that
        cannot be written is no cache, never an error."""
        # The answer as JSON text in the entry: pydantic's strict JSON mode then reads it back.
        text = json.dumps({"question": self.material, "answer": json.dumps(answer)})
        folder = self.entry.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
            _prune(folder)
            handle, name = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as file:
                    file.write(text)
                os.replace(name, self.entry)
            except BaseException:
                os.unlink(name)
                raise
        except OSError:
            return


def read_bounded(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes if it has at most ``limit``; None otherwise (absent, a FIFO or a
    device, too large, unreadable), without blocking."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        status = os.fstat(handle)
        if not stat.S_ISREG(status.st_mode) or status.st_size > limit:
            return None
        with os.fdopen(os.dup(handle), "rb") as file:
            data = file.read(limit + 1)
        return data if len(data) <= limit else None
    except OSError:
        return None
    finally:
        os.close(handle)


def _prune(folder: Path) -> None:
    """Keeps the folder under :data:`MAX_ENTRIES`: the older half goes when it is full."""
    entries = [entry for entry in os.scandir(folder) if entry.name.endswith(".json")]
    if len(entries) < MAX_ENTRIES:
        return
    entries.sort(key=lambda entry: entry.stat().st_mtime)
    for entry in entries[: len(entries) // 2]:
        Path(entry.path).unlink(missing_ok=True)


def _digest(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@cache
def installed_fingerprint() -> str | None:
    """What identifies the installed vLLM and everything else an answer depends on; None
    where answers are not cached (no vLLM, a checkout, no record of its files)."""
    distribution = installed_distribution()
    source = installed_source()
    if distribution is None or (source is not None and source.kind == "checkout"):
        return None
    record = distribution.read_text("RECORD")
    if not record:
        return None
    data = [p for folder in (PACKAGE / "registry", ENGINE_CONFIGS) for p in folder.rglob("*")]
    parts = {
        "vllm": f"{distribution.metadata['Name']} {distribution.version}",
        "record": _digest(record.encode()),
        "source": None if source is None else source.describe(),
        "transformers": _version("transformers"),
        "torch": _version("torch"),
        "python": platform.python_version(),
        "matrix": matrix_digest(),
        "data": _digest(
            *(
                part
                for path in sorted(p for p in data if p.is_file())
                for part in (path.relative_to(PACKAGE).as_posix().encode(), path.read_bytes())
            )
        ),
    }
    return json.dumps(parts, sort_keys=True)


def model_files_digest(path: Path) -> str | None:
    """The content of what vLLM reads for a model file: a description itself, a config.json's
    folder (its regular files, ``ModelConfig`` reads the folder); None where that is too much
    or unreadable: such a file is not cached."""
    files = [path]
    if path.name == CONFIG_JSON:
        try:
            with os.scandir(path.parent) as listing:
                files = []
                for entry in listing:
                    files.append(Path(entry.path))
                    if len(files) > MAX_MODEL_FILES:
                        return None
        except OSError:
            return None
    parts: list[bytes] = []
    budget = MAX_MODEL_BYTES
    for file in sorted(files):
        if file.is_dir():
            continue
        data = read_bounded(file, budget)
        if data is None:
            return None
        budget -= len(data)
        parts += [file.name.encode(), data]
    return _digest(*parts)


def question(kind: str, model: Path, asked: object) -> Question | None:
    """The question ``asked`` (JSON data) of a model file, or None where it is not cached."""
    fingerprint = installed_fingerprint()
    files = model_files_digest(model)
    if fingerprint is None or files is None:
        return None
    material = json.dumps(
        {"kind": kind, "asked": asked, "model": str(model.resolve()), "files": files},
        sort_keys=True,
    )
    name = _digest(fingerprint.encode(), material.encode())
    return Question(kind, material, vllm_cache_root() / ENTRIES / f"{name}.json")


def plain_question(kind: str, asked: object) -> Question | None:
    """The question ``asked`` (JSON data) of the installed vLLM about no model file (the
    registry sweep's), or None where answers are not cached."""
    fingerprint = installed_fingerprint()
    if fingerprint is None:
        return None
    material = json.dumps({"kind": kind, "asked": asked}, sort_keys=True)
    name = _digest(fingerprint.encode(), material.encode())
    return Question(kind, material, vllm_cache_root() / ENTRIES / f"{name}.json")
