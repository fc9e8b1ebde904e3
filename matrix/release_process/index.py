"""The vLLM releases the package index serves, read with ``pypi-simple`` (requirements/index.txt;
no vLLM import): each version, whether it is a pre-release or yanked, and a release's declared
requirements, from its wheel's ``METADATA``: the index's metadata file where it serves one
(PEP 658, its digest checked), else read out of the wheel by HTTP byte ranges (its central
directory and that one member: a few hundred kB of a 240 MB wheel), never installed.
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

if TYPE_CHECKING:  # the index client is installed where the command runs (requirements/index.txt)
    import requests
    from pypi_simple import DistributionPackage

PROJECT = "vllm"
PYPI = "https://pypi.org/simple/"
TIMEOUT = 30.0  # seconds, per request
# The wheel whose metadata stands for the release's (they declare the same requirements).
PREFERRED_WHEEL = ("manylinux", "x86_64")


class IndexUnreachable(Exception):
    """The index could not be read (or its client is not installed); one line."""


class MetadataUnavailable(Exception):
    """A release's wheel metadata could not be read; one line."""


def default_index() -> str:
    """The index to read: ``PIP_INDEX_URL`` where pip is pointed elsewhere, else PyPI's."""
    return os.environ.get("PIP_INDEX_URL") or PYPI


@dataclass(frozen=True)
class Served:
    """A version the index serves, and its files."""

    version: str
    prerelease: bool
    yanked: bool  # every file of it yanked
    files: tuple[DistributionPackage, ...]

    @property
    def key(self) -> Version:
        """What orders versions (PEP 440)."""
        return Version(self.version)


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:300] or type(error).__name__


def _client(endpoint: str) -> Any:
    try:
        from pypi_simple import PyPISimple
    except ImportError:
        raise IndexUnreachable(
            "the package index client is not installed (requirements/index.txt): "
            "run it through tox -e newrelease"
        ) from None
    return PyPISimple(endpoint)


def served(endpoint: str) -> list[Served]:
    """Every version of vLLM ``endpoint`` serves, newest first; :class:`IndexUnreachable`."""
    with _client(endpoint) as client:
        import requests
        from pypi_simple import NoSuchProjectError, UnsupportedRepoVersionError

        try:
            page = client.get_project_page(PROJECT, timeout=TIMEOUT)
        except NoSuchProjectError:
            raise IndexUnreachable(f"{endpoint} serves no project {PROJECT}") from None
        # ValueError: not an index page (another content type, JSON that is not one).
        except (requests.RequestException, UnsupportedRepoVersionError, ValueError) as error:
            raise IndexUnreachable(f"{endpoint} cannot be read: {_one_line(error)}") from None
    files: dict[str, list[DistributionPackage]] = {}
    for package in page.packages:
        if package.version is not None:
            files.setdefault(package.version, []).append(package)
    found = []
    for version, packages in files.items():
        try:
            parsed = Version(version)
        except InvalidVersion:
            continue  # not a version pip would install either
        yanked = all(p.is_yanked for p in packages)
        found.append(Served(version, parsed.is_prerelease, yanked, tuple(packages)))
    return sorted(found, key=lambda s: s.key, reverse=True)


def find(releases: Sequence[Served], version: str) -> Served | None:
    """The served version equal to ``version`` (PEP 440's equality: 0.34 is 0.34.0)."""
    wanted = Version(version)
    return next((s for s in releases if s.key == wanted), None)


def _wheel(release: Served) -> DistributionPackage:
    wheels = [p for p in release.files if p.package_type == "wheel"]
    if not wheels:
        raise MetadataUnavailable(f"vLLM {release.version}: the index serves no wheel")
    preferred = [p for p in wheels if all(word in p.filename for word in PREFERRED_WHEEL)]
    return (preferred or wheels)[0]


class _Ranges(io.RawIOBase):
    """A remote file read by HTTP byte ranges (what :mod:`zipfile` needs: seek and read)."""

    def __init__(self, session: requests.Session, url: str, size: int) -> None:
        self._session, self._url, self._size, self._position = session, url, size, 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, buffer: Any) -> int:
        end = min(self._position + len(buffer), self._size)
        if end <= self._position:
            return 0
        headers = {"Range": f"bytes={self._position}-{end - 1}"}
        with self._session.get(self._url, headers=headers, timeout=TIMEOUT, stream=True) as got:
            if got.status_code != 206:  # the whole file would follow: not for 240 MB
                raise MetadataUnavailable(
                    f"{self._url}: no byte ranges served (HTTP {got.status_code})"
                )
            data = got.raw.read(end - self._position, decode_content=False)
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)


def _size(session: requests.Session, package: DistributionPackage) -> int:
    if package.size:
        return int(package.size)
    head = session.head(package.url, timeout=TIMEOUT, allow_redirects=True)
    head.raise_for_status()
    return int(head.headers["Content-Length"])


def _metadata_from_wheel(session: requests.Session, package: DistributionPackage) -> str:
    remote = io.BufferedReader(_Ranges(session, package.url, _size(session, package)), 1 << 16)
    with zipfile.ZipFile(remote) as wheel:
        names = [n for n in wheel.namelist() if n.count("/") == 1]
        members = [n for n in names if n.endswith(".dist-info/METADATA")]
        if len(members) != 1:
            raise MetadataUnavailable(f"{package.filename}: no single .dist-info/METADATA")
        return wheel.read(members[0]).decode("utf-8")


def wheel_metadata(endpoint: str, release: Served) -> str:
    """The ``METADATA`` of ``release``'s wheel, read from the index without installing it;
    :class:`MetadataUnavailable` naming why not."""
    package = _wheel(release)
    with _client(endpoint) as client:
        import requests
        from pypi_simple import DigestMismatchError, NoDigestsError

        try:
            if package.has_metadata:
                text: str = client.get_package_metadata(package, timeout=TIMEOUT)
                return text
            return _metadata_from_wheel(client.s, package)
        except (DigestMismatchError, NoDigestsError) as error:
            raise MetadataUnavailable(f"{package.filename}: {_one_line(error)}") from None
        except (requests.RequestException, zipfile.BadZipFile, KeyError, ValueError) as error:
            raise MetadataUnavailable(f"{package.filename}: {_one_line(error)}") from None
