"""``python -m matrix upstream``: the expected outcomes and their comparison, the outcome
record vLLM's test session writes, the archive's digest check, and the variant plugin on a
real scheduler. Nothing here downloads: the index is a local HTTP server."""

from __future__ import annotations

import configparser
import functools
import hashlib
import http.server
import io
import json
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from matrix.case.loading import load_case_file
from matrix.case.reading import CaseFileError
from matrix.releases import RELEASES
from matrix.upstream.expected import (
    Expected,
    Known,
    Result,
    Tiers,
    changes,
    compare,
    expected_path,
    load_expected,
)
from matrix.upstream.source import cache_root, hub_configs, offline_hub
from tests.helpers import REPO, WriteCase, needs_vllm

FILE = "tests/v1/core/test_x.py"
MODEL = Known(test=f"{FILE}::test_model", outcome="failed", needs="model", reason="llava")


def results(**outcomes: str) -> dict[str, Result]:
    made = (
        Result(f"{FILE}::{name}", outcome, f"{name} says no") for name, outcome in outcomes.items()
    )  # type: ignore[arg-type]
    return {r.nodeid: r for r in made}


def test_every_test_passing_is_as_expected() -> None:
    comparison = compare(results(test_a="passed", test_b="xfailed"), [], [FILE])
    assert comparison.ok
    assert comparison.counts() == {"passed": 1, "xfailed": 1}


def test_an_unlisted_failure_breaks_the_run() -> None:
    comparison = compare(results(test_a="passed", test_b="failed"), [], [FILE])
    assert not comparison.ok
    assert [r.nodeid for r in comparison.unexpected] == [f"{FILE}::test_b"]


def test_a_listed_failure_is_counted_by_what_it_needs() -> None:
    comparison = compare(results(test_a="passed", test_model="failed"), [MODEL], [FILE])
    assert comparison.ok
    assert comparison.by_need() == {("model", "failed"): 1}


def test_a_listed_test_that_passes_breaks_the_run() -> None:
    comparison = compare(results(test_a="passed", test_model="passed"), [MODEL], [FILE])
    assert not comparison.ok
    assert [s.known for s in comparison.stale] == [MODEL]
    assert [r.outcome for r in comparison.stale[0].results] == ["passed"]


def test_a_listed_test_that_is_gone_breaks_a_complete_run_only() -> None:
    assert not compare(results(test_a="passed"), [MODEL], [FILE]).ok
    assert compare(results(test_a="passed"), [MODEL], [FILE], complete=False).ok
    # An entry outside the run's paths (a core test in a quick run) is not looked for.
    assert compare(results(test_a="passed"), [MODEL], ["tests/v1/other.py"]).ok


def test_an_entry_covers_its_parameters_and_tests_under_it_only() -> None:
    entry = Known(test=f"{FILE}::test_model", outcome="error", needs="package", reason="x")
    assert entry.matches(f"{FILE}::test_model[cuda-4]")
    assert not entry.matches(f"{FILE}::test_model_two")
    whole_file = Known(test=FILE, outcome="error", needs="package", reason="import fails")
    assert whole_file.matches(FILE) and whole_file.matches(f"{FILE}::TestA::test_b")
    outcome = compare(results(test_model_two="failed"), [entry], [FILE])
    assert [r.nodeid for r in outcome.unexpected] == [f"{FILE}::test_model_two"]


def test_tiers_add_up_without_collecting_a_file_twice() -> None:
    tiers = Tiers(quick=[FILE], core=["tests/v1/core/test_y.py"], all=["tests/v1/core"])
    assert tiers.paths("quick") == [FILE]
    assert tiers.paths("core") == [FILE, "tests/v1/core/test_y.py"]
    assert tiers.paths("all") == ["tests/v1/core"]


def test_changes_name_the_assertion_of_the_run_that_failed() -> None:
    stock = results(test_a="passed", test_b="failed", test_c="passed")
    variant = results(test_a="failed", test_b="failed", test_d="passed")
    found = {c.nodeid.split("::")[1]: c for c in changes(stock, variant)}
    assert set(found) == {"test_a", "test_c", "test_d"}
    assert (found["test_a"].stock, found["test_a"].variant) == ("passed", "failed")
    assert found["test_a"].message == "test_a says no"
    assert found["test_c"].variant == "absent"


def test_a_bad_expected_file_is_one_line_naming_its_line(tmp_path: Path) -> None:
    path = tmp_path / "vllm-9.9.9.yaml"
    path.write_text(
        "release: 9.9.9\ntiers: {quick: [a.py]}\nknown:\n"
        "  - {tests: [a.py], outcome: broken, needs: gpu, reason: x}\n"
    )
    with pytest.raises(CaseFileError, match=r"vllm-9\.9\.9\.yaml:4: known\.0\.outcome"):
        load_expected(path)


def test_a_tier_path_missing_from_the_release_names_the_expected_file(tmp_path: Path) -> None:
    from matrix.tools.devsource import SourceError
    from matrix.upstream.driver import tier_paths

    (tmp_path / "tests" / "v1" / "core").mkdir(parents=True)
    (tmp_path / FILE).write_text("")
    expected = Expected(release="9.9.9", tiers=Tiers(quick=[FILE], core=["tests/v1/gone.py"]))
    assert tier_paths(expected, "quick", tmp_path, Path("e.yaml"), drop=False) == [FILE]
    with pytest.raises(SourceError, match=r"e\.yaml: tests/v1/gone\.py: not in the release"):
        tier_paths(expected, "core", tmp_path, Path("e.yaml"), drop=False)
    assert tier_paths(expected, "core", tmp_path, Path("e.yaml"), drop=True) == [FILE]


def test_an_unknown_variant_stops_the_command_before_anything_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from matrix.__main__ import main

    assert main(["upstream", "--upstream-variant", "no_such_rule"]) == 2
    assert "no variant 'no_such_rule'" in capsys.readouterr().err


def test_every_release_has_an_expected_file_and_an_env() -> None:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini", encoding="utf-8")
    for release in RELEASES:
        expected = load_expected(expected_path(f"{release}.0"))
        assert expected.release == f"{release}.0"
        assert f"testenv:upstream{release.replace('.', '')}" in tox
        tests = cache_root() / f"vllm-{release}.0"
        if tests.is_dir():  # unpacked by an earlier run: every tier path is in the release
            assert [p for p in expected.tiers.paths("core") if not (tests / p).exists()] == []


SESSION = """
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("no accelerator")

def test_passes():
    assert True

def test_fails():
    assert 1 + 1 == 3

def test_errors(broken):
    pass

@pytest.mark.skip(reason="needs a GPU")
def test_skips():
    pass

@pytest.mark.xfail(reason="known")
def test_xfails():
    assert False
"""


@pytest.mark.once
def test_the_plugin_records_every_outcome_and_the_run_is_judged_by_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_session=SESSION, test_broken="import no_such_package\n")
    record = pytester.path / "results.json"
    pytester.runpytest_inprocess(
        "-p",
        "no:matrix",
        "-p",
        "matrix.upstream.plugin",
        f"--upstream-results={record}",
        "--continue-on-collection-errors",
    )
    tests = json.loads(record.read_text())["tests"]
    outcomes = {nodeid: t["outcome"] for nodeid, t in tests.items()}
    assert outcomes == {
        "test_broken.py": "error",
        "test_session.py::test_passes": "passed",
        "test_session.py::test_fails": "failed",
        "test_session.py::test_errors": "error",
        "test_session.py::test_skips": "skipped",
        "test_session.py::test_xfails": "xfailed",
    }
    assert tests["test_session.py::test_fails"]["message"] == "assert (1 + 1) == 3"
    assert tests["test_session.py::test_errors"]["message"] == "RuntimeError: no accelerator"
    assert tests["test_session.py::test_skips"]["message"] == "Skipped: needs a GPU"
    assert "no_such_package" in tests["test_broken.py"]["message"]
    recorded = {k: Result(k, **v) for k, v in tests.items()}
    listed = [
        Known(test="test_broken.py", outcome="error", needs="package", reason="not installed"),
        Known(test="test_session.py::test_errors", outcome="error", needs="gpu", reason="x"),
        Known(test="test_session.py::test_skips", outcome="skipped", needs="gpu", reason="x"),
    ]
    paths = ["test_session.py", "test_broken.py"]
    unlisted = compare(recorded, listed, paths)
    assert [r.nodeid for r in unlisted.unexpected] == ["test_session.py::test_fails"]
    fails = Known(test="test_session.py::test_fails", outcome="failed", needs="model", reason="x")
    assert compare(recorded, [*listed, fails], paths).ok
    passes = Known(test="test_session.py::test_passes", outcome="failed", needs="gpu", reason="x")
    assert not compare(recorded, [*listed, fails, passes], paths).ok


def _archive(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"vllm-9.9.9/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def index(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A package index on this machine, serving a folder: (the folder, its simple API)."""
    served = tmp_path / "index"
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served, f"http://127.0.0.1:{server.server_address[1]}/simple/"
    finally:
        server.shutdown()
        server.server_close()


def _publish(served: Path, archive: bytes, digest: str) -> None:
    (served / "files").mkdir(parents=True)
    (served / "files" / "vllm-9.9.9.tar.gz").write_bytes(archive)
    page = served / "simple" / "vllm" / "index.html"
    page.parent.mkdir(parents=True)
    link = f"../../files/vllm-9.9.9.tar.gz#sha256={digest}"
    page.write_text(f'<html><body><a href="{link}">vllm-9.9.9.tar.gz</a></body></html>')


ARCHIVE = {
    "pyproject.toml": b"[tool.pytest.ini_options]\n",
    "tests/conftest.py": b"",
    "tests/v1/test_x.py": b"def test_x():\n    pass\n",
    "vllm/__init__.py": b"",
}


def test_the_archive_is_unpacked_when_its_digest_matches(
    index: tuple[Path, str], tmp_path: Path
) -> None:
    pytest.importorskip("pypi_simple")
    from matrix.upstream.source import fetch_tests, source_record

    served, endpoint = index
    archive = _archive(ARCHIVE)
    _publish(served, archive, hashlib.sha256(archive).hexdigest())
    root = fetch_tests("9.9.9", tmp_path / "cache", endpoint)
    assert (root / "tests" / "v1" / "test_x.py").is_file()
    assert (root / "pyproject.toml").is_file()
    assert not (root / "vllm").exists()  # the installed vLLM is what the tests import
    assert source_record(root)["sha256"] == hashlib.sha256(archive).hexdigest()


def test_a_release_tree_holds_the_vllm_package_beside_its_tests(
    index: tuple[Path, str], tmp_path: Path
) -> None:
    pytest.importorskip("pypi_simple")
    from matrix.upstream.source import fetch_tests, fetch_tree

    served, endpoint = index
    archive = _archive(ARCHIVE)
    _publish(served, archive, hashlib.sha256(archive).hexdigest())
    tree = fetch_tree("9.9.9", tmp_path / "cache", endpoint)
    assert (tree / "vllm" / "__init__.py").is_file()
    assert (tree / "tests" / "v1" / "test_x.py").is_file()
    tests = fetch_tests("9.9.9", tmp_path / "cache", endpoint)
    assert tests != tree and not (tests / "vllm").exists()  # each folder keeps its own parts


def test_an_archive_whose_digest_differs_is_refused(
    index: tuple[Path, str], tmp_path: Path
) -> None:
    pytest.importorskip("pypi_simple")
    from matrix.tools.devsource import SourceError
    from matrix.upstream.source import fetch_tests

    served, endpoint = index
    _publish(served, _archive(ARCHIVE), hashlib.sha256(b"another archive").hexdigest())
    with pytest.raises(SourceError, match=r"vLLM 9\.9\.9's source archive refused"):
        fetch_tests("9.9.9", tmp_path / "cache", endpoint)
    assert list((tmp_path / "cache").iterdir()) == []  # nothing kept, nothing half unpacked


def test_the_shipped_hub_configs_are_where_huggingface_hub_looks(tmp_path: Path) -> None:
    hub_api = pytest.importorskip("huggingface_hub")
    assert "facebook/opt-125m" in hub_configs()
    hub = offline_hub(tmp_path)
    found = hub_api.try_to_load_from_cache("facebook/opt-125m", "config.json", cache_dir=hub)
    assert isinstance(found, str)
    assert json.loads(Path(found).read_text())["model_type"] == "opt"


SPEC_CASE = """\
name: spec
groups:
  - {kind: full, block_size: 4}
  - {kind: full, block_size: 8}
speculative: {method: eagle, num_tokens: 3}
pool: 40
requests:
  - {id: a, prompt: 16}
"""


@needs_vllm
@pytest.mark.parametrize("name", ["none", "original", "fixed"])
def test_the_plugin_applies_a_variant_to_every_scheduler_built(
    adapter: Any, write_case: WriteCase, name: str
) -> None:
    """A scheduler built anywhere while the plugin's variant is installed reserves what the
    harness's own application of that variant gives; the class is left as it was."""
    from vllm.v1.core.sched.scheduler import Scheduler

    from matrix.run.variants import VARIANTS
    from matrix.upstream.plugin import install_variant

    case = load_case_file(write_case(SPEC_CASE))[1]
    harness = adapter.build(case, 40)
    VARIANTS[name].apply(harness)
    stock = adapter.build(case, 40).reservation()
    construct = Scheduler.__init__
    restore = install_variant(VARIANTS[name])
    try:
        built = adapter.build(case, 40)  # its scheduler is built by Scheduler(...), as vLLM's tests
    finally:
        restore()
    assert Scheduler.__init__ is construct
    assert "_inflight_prefill_reserved_blocks" in vars(built.scheduler)
    assert built.reservation() == harness.reservation()
    assert adapter.build(case, 40).reservation() == stock  # restored: stock again


@needs_vllm
def test_the_plugin_passes_only_the_cpu_platforms_triton_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """0.34's CPU platform refuses x86 without Triton when a config is checked: the plugin runs
    that check again as with Triton, for that call only; any other refusal still raises, and the
    check is put back."""
    import vllm.triton_utils as triton_utils
    from vllm.platforms.cpu import CpuPlatform

    from matrix.upstream.plugin import pass_triton_check

    seen: list[bool] = []

    def check(cls: Any, config: dict[str, str]) -> None:
        seen.append(triton_utils.HAS_TRITON)
        if config.get("refuse"):
            raise RuntimeError(config["refuse"])
        if not triton_utils.HAS_TRITON:
            raise RuntimeError("vLLM on x86 CPUs requires Triton (triton-cpu).")

    monkeypatch.setattr(triton_utils, "HAS_TRITON", False)
    monkeypatch.setattr(CpuPlatform, "check_and_update_config", classmethod(check))
    with pytest.raises(RuntimeError, match="requires Triton"):
        CpuPlatform.check_and_update_config({})
    replaced = CpuPlatform.__dict__["check_and_update_config"]
    restore = pass_triton_check()
    try:
        CpuPlatform.check_and_update_config({})
        assert seen[1:] == [False, True] and not triton_utils.HAS_TRITON
        with pytest.raises(RuntimeError, match="no memory"):
            CpuPlatform.check_and_update_config({"refuse": "no memory"})
    finally:
        restore()
    assert CpuPlatform.__dict__["check_and_update_config"] is replaced
