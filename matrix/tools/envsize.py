"""``python -m matrix.tools.envsize [PATH ...]``: disk used by tox envs, each file counted once.

tox installs through uv, which hardlinks files from its cache, so envs for different releases
share most of their files. Summing each env's size (or running ``du`` per env) counts a shared
file once per env; this counts every inode once, so the figure does not depend on how the envs
were measured. Sizes are allocated blocks, as ``du`` reports them.

A PATH that is an environment (it has ``pyvenv.cfg``) is one env; any other folder is a
folder of envs (``.tox``, the default), each of its subfolders one env.
"""

from __future__ import annotations

import argparse
import os
import stat as stat_mode
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

FileId = tuple[int, int]  # (device, inode)

MB = 1_000_000


@dataclass
class EnvUsage:
    """One env's files: their identities and allocated bytes (each inode once)."""

    path: Path
    sizes: dict[FileId, int] = field(default_factory=dict)
    # regular files: (links seen here, links the file has in all)
    links: dict[FileId, tuple[int, int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """The env's allocated bytes, each inode once."""
        return sum(self.sizes.values())


def _entries(root: Path) -> Iterator[os.stat_result]:
    """Every file, folder and link under root, root included; links are not followed."""
    yield root.lstat()
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in (*dirs, *files):
            try:
                yield os.lstat(os.path.join(folder, name))
            except FileNotFoundError:  # removed while walking (a running env)
                continue


def measure(root: Path) -> EnvUsage:
    """The files under ``root``, each inode once, with their sizes and links."""
    usage = EnvUsage(root)
    for stat in _entries(root):
        file_id = (stat.st_dev, stat.st_ino)
        usage.sizes[file_id] = stat.st_blocks * 512
        if stat_mode.S_ISREG(stat.st_mode):
            seen = usage.links.get(file_id, (0, 0))[0]
            usage.links[file_id] = (seen + 1, stat.st_nlink)
    return usage


def envs_under(path: Path) -> list[Path]:
    """The envs ``path`` names: itself when it is an env (or no folder), else its subfolders."""
    if (path / "pyvenv.cfg").is_file() or not path.is_dir():
        return [path]
    return sorted(child for child in path.iterdir() if child.is_dir() and not child.is_symlink())


@dataclass
class Report:
    """The envs measured together: each one's unshared bytes, the total, what is linked outside."""

    envs: list[EnvUsage]
    # bytes of each env's inodes that no other measured env links
    alone: dict[Path, int]
    total: int
    # bytes of files also linked from outside the measured envs (uv's cache)
    outside: int


def report(envs: Iterable[EnvUsage]) -> Report:
    """The envs compared: each one's bytes no other shares, the total, what is linked elsewhere."""
    envs = list(envs)
    owners: dict[FileId, int] = {}
    sizes: dict[FileId, int] = {}
    seen: dict[FileId, tuple[int, int]] = {}
    for env in envs:
        for file_id, size in env.sizes.items():
            owners[file_id] = owners.get(file_id, 0) + 1
            sizes[file_id] = size
        for file_id, (links, nlink) in env.links.items():
            seen[file_id] = (seen.get(file_id, (0, 0))[0] + links, nlink)
    outside = sum(sizes[fid] for fid, (links, nlink) in seen.items() if nlink > links)
    alone = {
        env.path: sum(size for fid, size in env.sizes.items() if owners[fid] == 1) for env in envs
    }
    return Report(envs, alone, sum(sizes.values()), outside)


def format_report(result: Report) -> str:
    """The report as a table in MB, with a line saying what its columns mean."""
    width = max([len("total (each file once)"), *(len(str(e.path)) for e in result.envs)])
    lines = [f"{'env':<{width}}  {'size MB':>9}  {'alone MB':>9}"]
    for env in result.envs:
        size, alone = env.total / MB, result.alone[env.path] / MB
        lines.append(f"{env.path!s:<{width}}  {size:>9.0f}  {alone:>9.0f}")
    lines.append(f"{'total (each file once)':<{width}}  {result.total / MB:>9.0f}")
    lines.append(f"{'  also linked elsewhere':<{width}}  {result.outside / MB:>9.0f}")
    lines.append(f"{'  only here':<{width}}  {(result.total - result.outside) / MB:>9.0f}")
    lines.append(
        "size: the env alone, each file once; alone: what no other env listed shares; "
        "also linked elsewhere: files hardlinked from outside these envs (uv's cache), "
        "whose space is not freed by deleting the envs"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: measures the envs the paths name; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m matrix.tools.envsize", description=__doc__)
    parser.add_argument("paths", nargs="*", type=Path, default=[Path(".tox")])
    args = parser.parse_args(argv)
    missing = [p for p in args.paths if not p.exists()]
    if missing:
        print(
            f"matrix.tools.envsize: no such path: {', '.join(map(str, missing))}", file=sys.stderr
        )
        return 2
    roots = [env for path in args.paths for env in envs_under(path)]
    print(format_report(report(measure(root) for root in roots)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
