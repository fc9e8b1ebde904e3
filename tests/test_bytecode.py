"""Bytecode shared between tox envs (matrix/tools/bytecode.py): only for the same source file."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
from pathlib import Path

from matrix.tools.bytecode import share_bytecode

TAG = sys.implementation.cache_tag


def _site(root: Path, name: str) -> Path:
    site = root / name / "lib" / "site-packages" / "pkg"
    site.mkdir(parents=True)
    return site.parent


def test_a_shared_source_gets_the_donor_s_bytecode_and_python_uses_it(tmp_path: Path) -> None:
    donor, site = _site(tmp_path, "a"), _site(tmp_path, "b")
    (donor / "pkg" / "same.py").write_text("VALUE = 1\n")
    os.link(donor / "pkg" / "same.py", site / "pkg" / "same.py")  # as uv links from its cache
    (donor / "pkg" / "own.py").write_text("VALUE = 2\n")
    (site / "pkg" / "own.py").write_text("VALUE = 2\n")  # equal text, another file: not shared
    for module in ("same", "own"):
        py_compile.compile(str(donor / "pkg" / f"{module}.py"), doraise=True)

    assert share_bytecode(site, [donor, site, tmp_path / "absent"]) == 1

    given = site / "pkg" / "__pycache__" / f"same.{TAG}.pyc"
    assert given.stat().st_ino == (donor / "pkg" / "__pycache__" / given.name).stat().st_ino
    assert not (site / "pkg" / "__pycache__" / f"own.{TAG}.pyc").exists()
    # Python takes the linked file as valid: importing writes no new one in its place.
    code = "import pkg.same; print(pkg.same.VALUE, pkg.same.__file__)"
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    shown = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert shown == ["1", str(site / "pkg" / "same.py")]
    assert given.stat().st_nlink == 2
    assert share_bytecode(site, [donor]) == 0  # never over a file already there
