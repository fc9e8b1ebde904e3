"""matrix.tools.envsize counts a hardlinked file once, however many envs link it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from matrix.tools.envsize import envs_under, main, measure, report

BLOCK = 64 * 1024  # big enough that every filesystem allocates at least this much


def make_env(root: Path) -> Path:
    (root / "lib").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return root


def test_hardlinked_files_count_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tox = tmp_path / ".tox"
    first, second = make_env(tox / "first"), make_env(tox / "second")
    shared = first / "lib" / "shared.bin"
    shared.write_bytes(b"x" * BLOCK)
    os.link(shared, second / "lib" / "shared.bin")
    (second / "lib" / "own.bin").write_bytes(b"y" * BLOCK)

    assert envs_under(tox) == [first, second]
    assert envs_under(first) == [first]
    usage = [measure(env) for env in envs_under(tox)]
    result = report(usage)

    def size(path: Path) -> int:
        stat = path.stat()
        return usage[1].sizes[(stat.st_dev, stat.st_ino)]

    shared_size, own_size = size(shared), size(second / "lib" / "own.bin")
    assert shared_size >= BLOCK and own_size >= BLOCK
    # The shared file is in both envs, counted in the total once.
    assert result.total == usage[0].total + usage[1].total - shared_size
    # It belongs to neither env alone; the second env's own file does.
    assert result.alone[first] == usage[0].total - shared_size
    assert result.alone[second] == usage[1].total - shared_size >= own_size

    # A link from outside the envs (as uv's cache holds) makes the shared file "elsewhere".
    assert result.outside == 0
    os.link(shared, tmp_path / "cache.bin")
    assert report(measure(env) for env in envs_under(tox)).outside == shared_size

    assert main([str(tox)]) == 0
    out = capsys.readouterr().out
    assert str(second) in out and "total (each file once)" in out


def test_missing_path_fails(tmp_path: Path) -> None:
    assert main([str(tmp_path / "absent")]) == 2
