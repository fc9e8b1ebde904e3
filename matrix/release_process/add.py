"""``python -m matrix releases --add X.Y.Z``: a release the index serves, newer than the newest
known one, given pins and tox envs written from the newest known release's (``pins``,
``tox_blocks``), what its wheel declares differently, then its env installed by tox and the
probe of every vLLM surface the adapters drive run there (``--probe --record`` against the
newest known release's record), so the adapter is written from a list of differences.

Nothing is written outside the clone, through a link, or over a file that is there already:
run again, it writes only what is missing and probes again. The release table
(``matrix/releases.py``) is left to the person writing the adapter.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from packaging.version import InvalidVersion, Version

from matrix.case.shipped import PACKAGE
from matrix.release_process import index
from matrix.release_process.pins import PinFiles, copied_pins, declared_changes, pinned_versions
from matrix.release_process.tox_blocks import add_release
from matrix.releases import (
    RELEASES,
    VERSION,
    env_name,
    newest_release,
    release_key,
    release_of,
)

CLONE = PACKAGE.parent
PROBE = "python -m matrix releases --probe --record --against {against}"
Runner = Callable[[Sequence[str], Path], int]


class Refused(Exception):
    """Why a release is not added; one line."""


def version_problem(version: str) -> str | None:
    """Why ``version`` cannot be added as a release, or None."""
    if VERSION.fullmatch(version) is None:
        return f"{version[:60]!r} is not a vLLM version (such as 0.35.0)"
    try:
        parsed = Version(version)
    except InvalidVersion:
        return f"{version[:60]!r} is not a version pip knows"
    if parsed.is_prerelease or parsed.is_devrelease or parsed.local:
        return f"{version} is a pre-release or a local build: the matrix adds releases"
    return None


def write_inside(root: Path, relative: str, text: str) -> Path:
    """Writes ``text`` to ``root/relative`` atomically, never through a link or outside
    ``root``."""
    base = root.resolve()
    target = base / relative
    if target.is_symlink() or not target.resolve().is_relative_to(base):
        raise Refused(f"{relative}: a link or outside {base}; not written")
    partial = target.with_name(f".{target.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, target)
    return target


def _pins(root: Path, newest_version: str, version: str) -> list[str]:
    said = []
    folder = root / "requirements"
    for source, name in zip(PinFiles(newest_version).names, PinFiles(version).names, strict=True):
        if (folder / name).exists():
            said.append(f"kept requirements/{name} (there already)")
            continue
        if not (folder / source).is_file():
            raise Refused(f"requirements/{source} is missing: nothing to write {name} from")
        text = (folder / source).read_text(encoding="utf-8")
        write_inside(
            root, f"requirements/{name}", copied_pins(text, newest_version, version, source)
        )
        said.append(f"wrote requirements/{name} (from {source})")
    return said


def _tox(root: Path, newest: str, newest_version: str, version: str) -> list[str]:
    text = (root / "tox.ini").read_text(encoding="utf-8")
    added = add_release(text, RELEASES, newest, newest_version, version, release_of(version))
    if added.text == text:
        return [f"kept tox.ini (its envs for {version} are there already)"]
    write_inside(root, "tox.ini", added.text)
    envs = ", ".join(added.envs) or "none new"
    return [f"wrote tox.ini: envs {envs}; named in {', '.join(added.lists) or 'no list'}"]


def _declared(endpoint: str, old: index.Served, new: index.Served, pins_text: str) -> list[str]:
    try:
        before = index.wheel_metadata(endpoint, old)
        after = index.wheel_metadata(endpoint, new)
    except index.MetadataUnavailable as error:
        return [f"the wheels' declared requirements were not compared: {error}"]
    changes = declared_changes(before, after, pins_text)
    heading = f"What vLLM {new.version}'s wheel declares differently from {old.version}'s"
    return [f"{heading} ({len(changes)}):", *(f"  {line}" for line in changes)]


def _run(command: Sequence[str], cwd: Path) -> int:
    return subprocess.run(list(command), cwd=cwd, check=False).returncode


def tox_command(release: str, against: str) -> list[str]:
    """The tox run that installs ``release``'s env and probes it against ``against``'s record."""
    tox = shutil.which("tox")
    if tox is None:
        raise Refused(
            "tox is not on PATH (python -m pip install tox==4.67.15), or use --no-install"
        )
    env = env_name(release)
    return [tox, "-e", env, "-x", f"testenv:{env}.commands={PROBE.format(against=against)}"]


def add(version: str, endpoint: str, install: bool, root: Path = CLONE, run: Runner = _run) -> int:
    """Adds ``version`` (see the module's docstring); the exit code: 0 done, 2 refused, 3 the
    index unreadable, else tox's."""
    try:
        problem = version_problem(version)
        if problem:
            raise Refused(problem)
        release, newest = release_of(version), newest_release()
        if release in RELEASES:
            raise Refused(f"vLLM {version} is a known release ({release}: matrix/releases.py)")
        if release_key(version) < release_key(newest):
            raise Refused(f"vLLM {version} is older than the newest known release, {newest}")
        newest_version = pinned_versions(root / "requirements").get(newest)
        if newest_version is None:
            raise Refused(f"the newest known release, {newest}, has no pins in requirements/")
        served = index.served(endpoint)
        this, base = index.find(served, version), index.find(served, newest_version)
        if this is None or this.prerelease:
            on_index = next((s.version for s in served if not s.prerelease), "nothing")
            raise Refused(f"vLLM {version} is not on {endpoint} (its newest release: {on_index})")
        said = _pins(root, newest_version, version) + _tox(root, newest, newest_version, version)
        command = tox_command(release, newest_version) if install else None
    except Refused as error:
        print(f"matrix releases --add: {error}", file=sys.stderr)
        return 2
    except index.IndexUnreachable as error:
        print(f"matrix releases --add: {error}", file=sys.stderr)
        return 3
    pins_text = (root / "requirements" / PinFiles(version).names[0]).read_text(encoding="utf-8")
    if base is not None:
        said += _declared(endpoint, base, this, pins_text)
    for line in said:
        print(line)
    probe = PROBE.format(against=newest_version)
    if command is None:
        print(f"not installed (--no-install): tox -e {env_name(release)}, then `{probe}` in it")
        return 0
    print(f"$ {shlex.join(command)}", flush=True)
    return run(command, root)
