"""``python -m matrix releases`` against a package index served here (PEP 691 JSON, wheels
read by byte ranges, PEP 658 metadata files): the listing and its exit codes, a release's
wheel metadata read without installing it, and ``--add``'s pins, tox envs and refusals on a
copy of this clone's files."""

from __future__ import annotations

import configparser
import hashlib
import io
import json
import shutil
import threading
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("pypi_simple", reason="requirements/index.txt is not installed")

from matrix.__main__ import main
from matrix.ci.tox_commands import read_env
from matrix.release_process import add as add_module
from matrix.release_process import index
from matrix.release_process.pins import declared_changes, pinned_versions
from matrix.releases import RELEASES, env_name, newest_release
from tests.helpers import REPO

NEWEST_PINNED = pinned_versions(REPO / "requirements")[newest_release()]
METADATA = """\
Metadata-Version: 2.4
Name: vllm
Version: {version}
Requires-Dist: torch=={torch}
Requires-Dist: transformers<{transformers},>=4.56
Requires-Dist: regex
{extra}Requires-Dist: zentorch==2.14.0.2; extra == "zen"
"""


def metadata(
    version: str, torch: str = "2.13.0", transformers: str = "5.21", extra: str = ""
) -> str:
    """A vLLM wheel's METADATA, with what it declares."""
    return METADATA.format(version=version, torch=torch, transformers=transformers, extra=extra)


def wheel(version: str, text: str) -> bytes:
    """A wheel holding ``text`` as its METADATA, behind a member large enough that a reader
    of the whole file would show."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("vllm/big.bin", bytes(400_000))
        archive.writestr(f"vllm-{version}.dist-info/METADATA", text)
        archive.writestr(f"vllm-{version}.dist-info/RECORD", "")
    return buffer.getvalue()


@dataclass
class FakeIndex:
    """A simple index served on localhost: a JSON project page and its files."""

    endpoint: str
    files: dict[str, bytes] = field(default_factory=dict)
    entries: list[dict[str, object]] = field(default_factory=list)
    ranges: bool = True
    requested: list[str] = field(default_factory=list)
    page: bytes | None = None  # served instead of the project page

    def serve(
        self,
        version: str,
        text: str | None = None,
        yanked: bool = False,
        metadata_file: bool = False,
    ) -> None:
        """Serves vLLM ``version``: an sdist and an x86_64 wheel with ``text`` as METADATA."""
        data = wheel(version, text or metadata(version))
        names = {
            f"vllm-{version}.tar.gz": b"sdist",
            f"vllm-{version}-cp38-abi3-manylinux_2_28_x86_64.whl": data,
        }
        for name, content in names.items():
            self.files[name] = content
            entry: dict[str, object] = {
                "filename": name,
                "url": f"../../files/{name}",
                "hashes": {"sha256": hashlib.sha256(content).hexdigest()},
                "yanked": yanked,
            }
            if metadata_file and name.endswith(".whl"):
                text_bytes = (text or metadata(version)).encode()
                self.files[f"{name}.metadata"] = text_bytes
                entry["core-metadata"] = {"sha256": hashlib.sha256(text_bytes).hexdigest()}
            self.entries.append(entry)


def _handler(fake: FakeIndex) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, body: bytes, content_type: str, extra: dict[str, str]) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in extra.items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_HEAD(self) -> None:
            self.do_GET()

        def do_GET(self) -> None:
            fake.requested.append(f"{self.command} {self.path} {self.headers.get('Range', '')}")
            if self.path == "/simple/vllm/":
                page = (
                    fake.page
                    or json.dumps(
                        {"meta": {"api-version": "1.1"}, "name": "vllm", "files": fake.entries}
                    ).encode()
                )
                self._send(200, page, "application/vnd.pypi.simple.v1+json", {})
                return
            name = self.path.removeprefix("/files/")
            if not self.path.startswith("/files/") or name not in fake.files:
                self._send(404, b"not here", "text/plain", {})
                return
            body = fake.files[name]
            wanted = self.headers.get("Range")
            if wanted and fake.ranges and self.command == "GET":
                start, end = (int(n) for n in wanted.removeprefix("bytes=").split("-"))
                part = body[start : end + 1]
                span = {"Content-Range": f"bytes {start}-{start + len(part) - 1}/{len(body)}"}
                self._send(206, part, "application/octet-stream", span)
                return
            self._send(200, body, "application/octet-stream", {})

    return Handler


@pytest.fixture
def fake_index() -> Iterator[FakeIndex]:
    """An index on localhost serving the known releases' pinned versions."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    fake = FakeIndex(f"http://127.0.0.1:{server.server_address[1]}/simple/")
    server.RequestHandlerClass = _handler(fake)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    for version in pinned_versions(REPO / "requirements").values():
        fake.serve(version)
    fake.serve("0.29.0")
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def releases(
    fake: FakeIndex, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """``python -m matrix releases`` on the fake index: exit code, stdout, stderr."""
    code = main(["releases", "--index", fake.endpoint, *args])
    printed = capsys.readouterr()
    return code, printed.out, printed.err


def test_the_known_releases_are_listed_newest_first_and_nothing_is_newer(
    fake_index: FakeIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_index.serve("0.35.0rc1")
    code, out, _ = releases(fake_index, capsys)
    assert code == 0
    lines = out.splitlines()
    versions = [line.split()[0] for line in lines[1 : 1 + len(RELEASES)]]
    assert versions == sorted(versions, key=lambda v: tuple(map(int, v.split("."))), reverse=True)
    newest = newest_release()
    assert f"known: {RELEASES[newest].adapter.rpartition('.')[2]}" in lines[1]
    assert f"tox -e {env_name(newest)}" in lines[1]
    assert "(left out: 1 older than 0.30" in out and "1 pre-releases (--pre" in out
    assert lines[-1] == f"matrix releases: nothing on the index is newer than {newest}"
    code, out, _ = releases(fake_index, capsys, "--pre", "--all")
    assert "0.35.0rc1" in out and "(pre-release)" in out and "0.29.0" in out
    assert "unknown: the 0.30 adapter (v0_30:Vllm030) would drive it" in out


def test_a_release_newer_than_the_newest_known_one_is_named_and_exits_1(
    fake_index: FakeIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_index.serve("0.99.0")
    fake_index.serve("0.98.0", yanked=True)  # yanked: not a release to add
    code, out, _ = releases(fake_index, capsys)
    assert code == 1
    assert "0.99.0  unknown, newer than" in out and "(yanked)" in out
    assert out.splitlines()[-1].startswith("matrix releases: the index has 0.99.0, newer than")
    assert "--add 0.99.0" in out


def test_without_the_newest_release_in_the_table_its_version_is_newer(
    fake_index: FakeIndex, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The acceptance test of issue 44: the table without its newest row names that release."""
    newest = newest_release()
    monkeypatch.delitem(RELEASES, newest)
    code, out, _ = releases(fake_index, capsys)
    assert code == 1
    assert f"the index has {NEWEST_PINNED}, newer than the newest known release" in out


def test_an_index_that_cannot_be_read_is_one_line_and_exit_3(
    fake_index: FakeIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_index.page = b"<html>not an index</html>"
    code, out, err = releases(fake_index, capsys)
    assert (code, out) == (3, "") and err.count("\n") == 1
    assert err.startswith(f"matrix releases: {fake_index.endpoint} cannot be read:")
    closed = FakeIndex("http://127.0.0.1:9/simple/")
    code, out, err = releases(closed, capsys)
    assert (code, out) == (3, "") and err.count("\n") == 1 and "cannot be read" in err


def test_a_wheels_metadata_is_read_by_byte_ranges_without_the_whole_wheel(
    fake_index: FakeIndex,
) -> None:
    found = index.find(index.served(fake_index.endpoint), NEWEST_PINNED)
    assert found is not None
    fake_index.requested.clear()
    assert index.wheel_metadata(fake_index.endpoint, found) == metadata(NEWEST_PINNED)
    ranges = [r for r in fake_index.requested if "bytes=" in r]
    assert ranges and len(ranges) == len(fake_index.requested) - (
        "HEAD" in str(fake_index.requested)
    )
    fake_index.ranges = False  # a server without ranges: refused, not 400 kB downloaded
    with pytest.raises(index.MetadataUnavailable, match="no byte ranges served"):
        index.wheel_metadata(fake_index.endpoint, found)


def test_a_metadata_file_on_the_index_is_read_instead(fake_index: FakeIndex) -> None:
    fake_index.serve("0.99.0", metadata("0.99.0", torch="2.15.0"), metadata_file=True)
    found = index.find(index.served(fake_index.endpoint), "0.99.0")
    assert found is not None
    fake_index.requested.clear()
    assert "torch==2.15.0" in index.wheel_metadata(fake_index.endpoint, found)
    assert [r.split()[1] for r in fake_index.requested] == [
        "/files/vllm-0.99.0-cp38-abi3-manylinux_2_28_x86_64.whl.metadata"
    ]


def test_what_a_new_wheel_declares_differently_is_a_line_each_beside_its_pin() -> None:
    pins = "torch==2.13.0+cpu\ntransformers==5.20.2\nregex==2026.11.19\n"
    old = metadata("1.0.0", torch="2.13.0", transformers="5.21")
    new = metadata(
        "1.1.0", torch="2.14.0", transformers="5.23", extra="Requires-Dist: einops>=0.8\n"
    )
    new = new.replace("Requires-Dist: regex\n", "")
    assert declared_changes(old, new, pins) == [
        "+ einops>=0.8: new (not pinned)",
        "- regex: no longer declared",
        "~ torch: ==2.13.0 -> ==2.14.0 (pinned 2.13.0+cpu: OUTSIDE it)",
        "~ transformers: <5.21,>=4.56 -> <5.23,>=4.56 (pinned 5.20.2: inside it)",
    ]


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """This clone's tox.ini and the newest known release's pins, in a folder of their own."""
    (tmp_path / "requirements").mkdir()
    shutil.copy(REPO / "tox.ini", tmp_path / "tox.ini")
    for suffix in ("", "-nodeps"):
        name = f"vllm-{NEWEST_PINNED}{suffix}.txt"
        shutil.copy(REPO / "requirements" / name, tmp_path / "requirements" / name)
    return tmp_path


def test_add_writes_the_pins_and_the_tox_envs_from_the_newest_release_s(
    fake_index: FakeIndex, clone: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_index.serve("0.99.0", metadata("0.99.0", torch="2.15.0"))
    code = add_module.add("0.99.0", fake_index.endpoint, install=False, root=clone)
    out = capsys.readouterr().out
    assert code == 0, out
    pins = (clone / "requirements" / "vllm-0.99.0.txt").read_text()
    old_pins = (REPO / "requirements" / f"vllm-{NEWEST_PINNED}.txt").read_text()
    assert pins.splitlines()[1:] == old_pins.replace(NEWEST_PINNED, "0.99.0").splitlines()
    nodeps = (clone / "requirements" / "vllm-0.99.0-nodeps.txt").read_text()
    assert "vllm==0.99.0" in nodeps.splitlines()
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(clone / "tox.ini")
    new, old = env_name("0.99"), env_name(newest_release())
    for family in ("vllm", "sweep", "upstream", "connectors"):
        assert read_env(clone / "tox.ini", f"{family}099").release == "0.99.0"
    labels = tox["tox"]["labels"]
    assert f"{old}, {new}," in labels and f"connectors{old[4:]}, connectors099" in labels
    assert f"ci{new[4:]}" not in labels  # CI's choice of releases is not the copy's
    assert new in tox["testenv:crossversion"]["depends"]
    assert "~ torch: ==2.13.0 -> ==2.15.0 (pinned 2.13.0+cpu: OUTSIDE it)" in out
    assert "not installed (--no-install): tox -e vllm099" in out
    before = {p.name: p.read_bytes() for p in clone.rglob("*") if p.is_file()}
    assert add_module.add("0.99.0", fake_index.endpoint, install=False, root=clone) == 0
    assert {p.name: p.read_bytes() for p in clone.rglob("*") if p.is_file()} == before
    assert "kept requirements/vllm-0.99.0.txt (there already)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("version", "said"),
    [
        (NEWEST_PINNED, "is a known release"),
        ("0.98.0", "is not on"),
        ("0.99.0rc1", "is a pre-release"),
        ("../../x", "is not a vLLM version"),
        ("0.29.0", "is older than the newest known release"),
    ],
)
def test_add_refuses_a_release_it_cannot_add_in_one_line(
    fake_index: FakeIndex,
    clone: Path,
    capsys: pytest.CaptureFixture[str],
    version: str,
    said: str,
) -> None:
    before = sorted(p.name for p in clone.rglob("*"))
    assert add_module.add(version, fake_index.endpoint, install=False, root=clone) == 2
    err = capsys.readouterr().err
    assert err.startswith("matrix releases --add: ") and said in err and err.count("\n") == 1
    assert sorted(p.name for p in clone.rglob("*")) == before


def test_add_writes_through_no_link(
    fake_index: FakeIndex,
    clone: Path,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    outside = tmp_path_factory.mktemp("outside") / "tox.ini"
    outside.write_text((clone / "tox.ini").read_text())
    (clone / "tox.ini").unlink()
    (clone / "tox.ini").symlink_to(outside)
    fake_index.serve("0.99.0")
    assert add_module.add("0.99.0", fake_index.endpoint, install=False, root=clone) == 2
    assert "tox.ini: a link or outside" in capsys.readouterr().err
    assert "vllm099" not in outside.read_text()


def test_add_installs_the_env_and_probes_it_against_the_newest_release_s_record(
    fake_index: FakeIndex,
    clone: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake_index.serve("0.99.0")
    monkeypatch.setattr(add_module.shutil, "which", lambda name: f"/bin/{name}")
    ran: list[tuple[Sequence[str], Path]] = []

    def run(command: Sequence[str], cwd: Path) -> int:
        ran.append((command, cwd))
        return 0

    assert add_module.add("0.99.0", fake_index.endpoint, install=True, root=clone, run=run) == 0
    probe = f"python -m matrix releases --probe --record --against {NEWEST_PINNED}"
    assert ran == [
        (["/bin/tox", "-e", "vllm099", "-x", f"testenv:vllm099.commands={probe}"], clone)
    ]
    assert f"$ /bin/tox -e vllm099 -x 'testenv:vllm099.commands={probe}'" in capsys.readouterr().out
