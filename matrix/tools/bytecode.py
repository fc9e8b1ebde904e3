"""Bytecode one tox env compiled, given to a sibling env that shares the source files.

uv hardlinks every installed file from its cache, so envs for different releases hold the very
same files for torch, numpy, sympy and the rest; but Python writes each module's bytecode in
the env that imports it, so every fresh env compiled torch and the others again on its first
run (15-20 s of CPU here, as much as some envs' whole work). A ``.pyc`` records its source's
mtime and size, which two links to one file share, so the other env's ``.pyc`` is exactly what
this env would write: it is linked in, never copied over a file already there. Sources that
differ (vLLM and transformers per release) are not the same file, and get nothing. Python
replaces a stale ``.pyc`` by writing a new file, so no env can change another's.

toxfile.py calls ``share_bytecode`` before an env's commands run, with the envs beside it as
donors; it reads no more than the standard library, as it runs inside tox.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

CACHE = "__pycache__"


def share_bytecode(site: Path, donors: Iterable[Path]) -> int:
    """Links into ``site`` each donor site-packages' ``.pyc`` whose source is the same file in
    both (one inode), where ``site`` has none of that name; how many it linked."""
    linked = 0
    for donor in donors:
        if not donor.is_dir() or donor == site:
            continue
        for cache in donor.rglob(CACHE):
            folder = site / cache.parent.relative_to(donor)
            if folder.is_dir():
                linked += _link_folder(cache, folder)
    return linked


def _link_folder(cache: Path, folder: Path) -> int:
    """Links the ``.pyc`` files of one donor ``__pycache__`` into ``folder``'s."""
    linked = 0
    for compiled in cache.glob("*.pyc"):
        source = compiled.name.partition(".")[0] + ".py"
        target = folder / CACHE / compiled.name
        try:
            if target.exists() or not os.path.samefile(folder / source, cache.parent / source):
                continue
            target.parent.mkdir(exist_ok=True)
            os.link(compiled, target)
        except OSError:  # no such source here, another filesystem, a race: compile it instead
            continue
        linked += 1
    return linked
