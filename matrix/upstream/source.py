"""Where vLLM's own tests come from: a release's source archive on the package index (its
digest checked), or a checkout's ``tests/``; and the offline Hugging Face cache they read.

A release's archive is found and downloaded with ``pypi-simple``, which checks the file against
the digest the index states; only its ``tests/`` folder and ``pyproject.toml`` (vLLM's pytest
settings) are unpacked, under the cache root (``~/.cache/vllm-kv-matrix/upstream`` by default,
outside the clone), once per release. ``fetch_tree`` unpacks the release's Python tree too
(``vllm/``), for what installs a release from source (a patched tree, ``bisect``'s history).
vLLM's code and tests are never part of this repository.

The Hugging Face cache holds the public ``config.json`` files shipped in ``matrix/models/`` under
a Hub name (``matrix/models/facebook/opt-125m/``): the models vLLM's scheduler tests build
configs for, read offline.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from matrix.case.shipped import ENGINE_CONFIGS
from matrix.installed import cache_base
from matrix.tools.devsource import SourceError

if TYPE_CHECKING:  # the index client is installed in the upstream envs only
    from pypi_simple import DistributionPackage

PROJECT = "vllm"
MARKER = ".matrix-source.json"  # written last: a folder without it is an unfinished unpacking
UNPACKED = ("tests/", "pyproject.toml")  # what of the archive the tests need
TREE = ("vllm/", *UNPACKED)  # the release's Python source beside them
HUB_REVISION = "matrix"  # the snapshot name the offline cache's refs/main points to


def cache_root() -> Path:
    """Where archives' tests are kept: ``MATRIX_UPSTREAM_CACHE``, else beside vLLM's cache roots."""
    stated = os.environ.get("MATRIX_UPSTREAM_CACHE")
    return Path(stated) if stated else cache_base() / "upstream"


@dataclass(frozen=True)
class Archive:
    """A release's source archive as the index lists it."""

    filename: str
    url: str
    sha256: str


def _sdist(packages: list[DistributionPackage], version: str) -> DistributionPackage:
    for package in packages:
        if package.version == version and package.package_type == "sdist":
            if not package.digests.get("sha256"):
                raise SourceError(f"{package.filename}: the index states no sha256 digest")
            return package
    raise SourceError(f"vLLM {version}: no source archive on the package index")


def _unpack(archive: Path, into: Path, parts: tuple[str, ...]) -> None:
    """Unpacks ``parts`` (folders ending in ``/``, files) of ``archive`` (whose members all sit in
    one top folder) into ``into``, refusing links and paths that leave it (tarfile's data
    filter)."""
    with tarfile.open(archive) as tar:
        members = []
        for member in tar.getmembers():
            _, _, inner = member.name.partition("/")
            if inner.startswith(parts):
                member.name = inner
                members.append(member)
        if not any(m.name == "pyproject.toml" for m in members):
            raise SourceError(f"{archive.name}: no tests/ and pyproject.toml in the archive")
        tar.extractall(into, members=members, filter="data")


def fetch_tests(version: str, root: Path | None = None, endpoint: str | None = None) -> Path:
    """The folder holding vLLM ``version``'s ``tests/`` and ``pyproject.toml``, downloaded from
    the index (``endpoint``, default PyPI's simple API) and unpacked once; raises
    :class:`SourceError`, a digest that does not match among the reasons."""
    return _fetch(version, UNPACKED, f"vllm-{version}", root, endpoint)


def fetch_tree(version: str, root: Path | None = None, endpoint: str | None = None) -> Path:
    """As :func:`fetch_tests`, with the release's ``vllm/`` package too (its Python files: what
    the scheduler needs), in a folder of its own; the folder is shared: copy it to change it."""
    return _fetch(version, TREE, f"vllm-{version}-tree", root, endpoint)


def _fetch(
    version: str, parts: tuple[str, ...], name: str, root: Path | None, endpoint: str | None
) -> Path:
    """``parts`` of vLLM ``version``'s source archive, unpacked once into ``root/name``."""
    root = cache_root() if root is None else root
    target = root / name
    if (target / MARKER).is_file():
        return target
    import requests
    from pypi_simple import DigestMismatchError, NoDigestsError, PyPISimple

    root.mkdir(parents=True, exist_ok=True)
    with (
        PyPISimple(endpoint) if endpoint else PyPISimple() as client,
        tempfile.TemporaryDirectory(dir=root, prefix=".unpacking-") as scratch,
    ):
        try:
            package = _sdist(client.get_project_page(PROJECT).packages, version)
            downloaded = Path(scratch) / package.filename
            client.download_package(package, downloaded, verify=True)
        except (DigestMismatchError, NoDigestsError) as error:
            raise SourceError(f"vLLM {version}'s source archive refused: {error}") from None
        except requests.RequestException as error:
            raise SourceError(
                f"vLLM {version}: the package index cannot be read: {error}"
            ) from None
        unpacked = Path(scratch) / "unpacked"
        _unpack(downloaded, unpacked, parts)
        archive = Archive(package.filename, package.url, package.digests["sha256"])
        (unpacked / MARKER).write_text(json.dumps(asdict(archive), indent=1) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        unpacked.rename(target)
    return target


def checkout_tests(checkout: Path) -> Path:
    """A vLLM checkout as the tests' folder: it holds ``tests/`` and ``pyproject.toml``."""
    checkout = checkout.expanduser().resolve()
    if not (checkout / "tests" / "conftest.py").is_file():
        raise SourceError(f"{checkout}: not a vLLM checkout with tests/ (no tests/conftest.py)")
    return checkout


def source_record(tests_root: Path) -> dict[str, str]:
    """Where the tests came from: the archive's name, address and digest, or the folder."""
    marker = tests_root / MARKER
    if marker.is_file():
        recorded: dict[str, str] = json.loads(marker.read_text())
        return recorded
    return {"checkout": str(tests_root)}


def hub_configs() -> dict[str, Path]:
    """The shipped ``config.json`` files named like Hub models (``org/name``), by that name."""
    return {
        str(path.parent.relative_to(ENGINE_CONFIGS)): path
        for path in sorted(ENGINE_CONFIGS.glob("*/*/config.json"))
    }


def offline_hub(root: Path) -> Path:
    """A Hugging Face Hub cache under ``root`` holding every shipped Hub-named config, laid
    out as ``huggingface_hub`` reads it offline; returns the folder for ``HF_HUB_CACHE``."""
    hub = root / "hf-hub"
    for name, config in hub_configs().items():
        repo = hub / f"models--{name.replace('/', '--')}"
        snapshot = repo / "snapshots" / HUB_REVISION
        snapshot.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(config, snapshot / "config.json")
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(HUB_REVISION)
    return hub
