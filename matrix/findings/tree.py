"""``python -m matrix.findings.tree VERSION``: vLLM VERSION's Python tree from its digest-checked
source archive, with the findings' fixes applied (every patch of
``docs/findings/patches/vllm-VERSION/``, in name order, or the ``--patch`` files named),
installed as the env's vLLM the way ``devsource`` installs a checkout (what ``tox -e
patched034`` runs; docs/findings.md, "The fixes as patches to vLLM").

The patched tree is kept beside the archive's unpacked tree (``matrix.upstream.source``), in a
folder named by the patches' digest (``vllm-0.34.0-patched-<digest>``): an edited patch never
reuses an old tree, and clones with the same patches share one. It holds ``vllm/``, ``tests/``
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


def release_patches(version: str) -> list[Path]:
    """The findings' patches for vLLM ``version``, one a fix, in the order they apply
    (``docs/findings/patches/vllm-X/*.patch``); empty for a release without them."""
    return sorted((PATCHES / f"vllm-{version}").glob("*.patch"))


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


def patched_tree(version: str, patches: list[Path], root: Path | None = None) -> Path:
    """vLLM ``version``'s tree (``vllm/``, ``tests/``, ``pyproject.toml``) with ``patches``
    applied in order, made once under ``root`` (default: the upstream cache); its marker
    records the archive and the patches."""
    if not patches:
        raise SourceError(f"no patches for vLLM {version} in {PATCHES}")
    missing = [str(p) for p in patches if not p.is_file()]
    if missing:
        raise SourceError(f"{', '.join(missing)}: no such patch")
    combined = hashlib.sha256()
    for patch in patches:  # each file's digest, so that no two lists digest alike
        combined.update(hashlib.sha256(patch.read_bytes()).digest())
    digest = combined.hexdigest()
    root = cache_root() if root is None else root
    target = root / f"vllm-{version}-patched-{digest[:12]}"
    if (target / MARKER).is_file():
        return target
    source = fetch_tree(version, root)
    with tempfile.TemporaryDirectory(dir=root, prefix=".patching-") as scratch:
        tree = Path(scratch) / "tree"
        shutil.copytree(source, tree, ignore=shutil.ignore_patterns(MARKER))
        for patch in patches:
            apply(patch, tree)
        record = json.loads((source / MARKER).read_text())
        record.update(patches=[p.name for p in patches], patches_sha256=digest)
        (tree / MARKER).write_text(json.dumps(record, indent=1) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        tree.rename(target)
    return target


def main(argv: list[str] | None = None) -> int:
    """The command line: makes the patched tree and installs it; returns the exit code."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m matrix.findings.tree", description=__doc__)
    parser.add_argument("version", help="the release, e.g. 0.34.0")
    parser.add_argument(
        "--patch",
        type=Path,
        action="append",
        help="a patch to apply (again for more, in order; default: docs/findings/patches/vllm-X/)",
    )
    parser.add_argument("--site", type=Path, default=Path(sysconfig.get_paths()["purelib"]))
    options = parser.parse_args(argv)
    patches = options.patch or release_patches(options.version)
    try:
        tree = patched_tree(options.version, patches)
        version = install(tree, options.site)
    except SourceError as error:
        print(f"matrix patched: {error}", file=sys.stderr)
        return 2
    names = ", ".join(p.name for p in patches)
    print(f"matrix patched: vLLM {version} from {tree} ({names} applied)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
