"""``python -m matrix.findings.tree VERSION``: vLLM VERSION's Python tree from its digest-checked
source archive, with the findings' fix applied (``docs/findings/patches/vllm-VERSION.patch``),
installed as the env's vLLM the way ``devsource`` installs a checkout (what ``tox -e
patched033`` runs; docs/findings.md, "The fixes as a patch to vLLM").

The patched tree is kept beside the archive's unpacked tree (``matrix.upstream.source``), in a
folder named by the patch's digest (``vllm-0.33.0-patched-<digest>``): an edited patch never
reuses an old tree, and clones with the same patch share one. It holds ``vllm/``, ``tests/``
and ``pyproject.toml``, so ``python -m matrix upstream`` runs vLLM's own tests from it. Needs
``patch`` (GNU patch) on the path.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from matrix.case.shipped import PATCHES
from matrix.tools.devsource import SourceError, install
from matrix.upstream.source import MARKER, cache_root, fetch_tree


def patch_path(version: str) -> Path:
    """The findings' patch for vLLM ``version`` (``docs/findings/patches/vllm-X.patch``)."""
    return PATCHES / f"vllm-{version}.patch"


def apply(patch: Path, tree: Path) -> None:
    """Applies ``patch`` (a unified diff with ``a/``, ``b/`` prefixes) to ``tree``, or raises
    :class:`SourceError` with what ``patch`` said; no file is left half changed (``--dry-run``
    first)."""
    for dry in (True, False):
        command = ["patch", "-p1", "--batch", "--forward", "-d", str(tree), "-i", str(patch)]
        try:
            done = subprocess.run(
                [*command, *(["--dry-run"] if dry else [])],
                capture_output=True,
                text=True,
                timeout=120,
            )
        except OSError as error:
            raise SourceError(f"cannot run patch: {error}") from None
        if done.returncode != 0:
            said = (done.stdout + done.stderr).strip().splitlines()
            raise SourceError(f"{patch.name} does not apply: {' / '.join(said[-3:])}")


def patched_tree(version: str, patch: Path, root: Path | None = None) -> Path:
    """vLLM ``version``'s tree (``vllm/``, ``tests/``, ``pyproject.toml``) with ``patch``
    applied, made once under ``root`` (default: the upstream cache); its marker records the
    archive and the patch."""
    if not patch.is_file():
        raise SourceError(f"{patch}: no such patch")
    digest = hashlib.sha256(patch.read_bytes()).hexdigest()
    root = cache_root() if root is None else root
    target = root / f"vllm-{version}-patched-{digest[:12]}"
    if (target / MARKER).is_file():
        return target
    source = fetch_tree(version, root)
    with tempfile.TemporaryDirectory(dir=root, prefix=".patching-") as scratch:
        tree = Path(scratch) / "tree"
        shutil.copytree(source, tree, ignore=shutil.ignore_patterns(MARKER))
        apply(patch, tree)
        record = json.loads((source / MARKER).read_text())
        record.update(patch=patch.name, patch_sha256=digest)
        (tree / MARKER).write_text(json.dumps(record, indent=1) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        tree.rename(target)
    return target


def main(argv: list[str] | None = None) -> int:
    """The command line: makes the patched tree and installs it; returns the exit code."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m matrix.findings.tree", description=__doc__)
    parser.add_argument("version", help="the release, e.g. 0.33.0")
    parser.add_argument("--patch", type=Path, help="default: docs/findings/patches/vllm-X.patch")
    parser.add_argument("--site", type=Path, default=Path(sysconfig.get_paths()["purelib"]))
    options = parser.parse_args(argv)
    patch = options.patch or patch_path(options.version)
    try:
        tree = patched_tree(options.version, patch)
        version = install(tree, options.site)
    except SourceError as error:
        print(f"matrix patched: {error}", file=sys.stderr)
        return 2
    print(f"matrix patched: vLLM {version} from {tree} ({patch.name} applied)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
