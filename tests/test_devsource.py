"""Your own vLLM: a checkout installed as the env's vLLM (matrix.tools.devsource), its version, and
the acceptance test: the installed release's own files, changed or not, run as a checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from matrix.installed import describe_path, source_of
from matrix.tools.devsource import SourceError, checkout_version, install, install_checkout
from tests.helpers import REPO, needs_vllm, replaced


def git(path: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def make_checkout(root: Path, version_file: str | None = None) -> Path:
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("")
    if version_file:
        (root / "vllm" / "_version.py").write_text(version_file)
    return root


def test_the_version_comes_from_the_package_then_git_then_the_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VLLM_VERSION", raising=False)
    built = make_checkout(tmp_path / "built", "__version__ = version = '0.34.0.dev5'\n")
    assert checkout_version(built) == "0.34.0.dev5"
    bare = make_checkout(tmp_path / "bare")
    with pytest.raises(SourceError, match="set VLLM_VERSION"):
        checkout_version(bare)
    git(bare, "init", "-q")
    git(bare, "add", ".")
    git(bare, "commit", "-qm", "one")
    git(bare, "tag", "v0.33.0")
    assert checkout_version(bare) == "0.33.0"
    (bare / "vllm" / "new.py").write_text("")
    git(bare, "add", ".")
    git(bare, "commit", "-qm", "two")
    assert checkout_version(bare) == f"0.33.0+1.g{git(bare, 'rev-parse', '--short', 'HEAD')}"
    monkeypatch.setenv("VLLM_VERSION", "0.31.0")
    assert checkout_version(bare) == "0.31.0"


def test_a_release_candidate_tag_gives_the_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit on vLLM's main branch describes itself from the last tag, often a release
    candidate's (bisect judges such commits)."""
    monkeypatch.delenv("VLLM_VERSION", raising=False)
    checkout = make_checkout(tmp_path / "co")
    git(checkout, "init", "-q")
    git(checkout, "add", ".")
    git(checkout, "commit", "-qm", "one")
    git(checkout, "tag", "v0.34.0rc1")
    (checkout / "vllm" / "new.py").write_text("")
    git(checkout, "add", ".")
    git(checkout, "commit", "-qm", "two")
    sha = git(checkout, "rev-parse", "--short", "HEAD")
    assert checkout_version(checkout) == f"0.34.0rc1+1.g{sha}"


def test_the_source_names_its_commit_and_whether_it_is_dirty(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "co")
    assert describe_path(checkout, "checkout").commit is None
    git(checkout, "init", "-q")
    git(checkout, "add", ".")
    git(checkout, "commit", "-qm", "one")
    clean = describe_path(checkout, "checkout")
    assert clean.commit == git(checkout, "rev-parse", "HEAD") and clean.dirty is False
    (checkout / "vllm" / "__init__.py").write_text("changed = True\n")
    dirty = describe_path(checkout, "checkout")
    assert dirty.dirty is True and "uncommitted changes" in dirty.describe()


def test_an_installed_checkout_answers_metadata_and_names_its_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_VERSION", "0.34.0.dev1")
    checkout = make_checkout(tmp_path / "co")
    site = tmp_path / "site"
    site.mkdir()
    assert install_checkout(checkout, site) == "0.34.0.dev1"
    assert (site / "matrix-vllm-source.pth").read_text().strip() == str(checkout)
    distribution = metadata.PathDistribution(site / "vllm-0.34.0.dev1.dist-info")
    assert distribution.version == "0.34.0.dev1"
    source = source_of(distribution)
    assert source is not None and source.path == str(checkout) and source.kind == "checkout"


def test_an_installed_release_is_not_replaced(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "vllm-0.33.0.dist-info").mkdir(parents=True)
    (site / "vllm-0.33.0.dist-info" / "INSTALLER").write_text("uv\n")
    with pytest.raises(SourceError, match="already installed"):
        install(make_checkout(tmp_path / "co"), site)


# --- acceptance: the installed release's own Python files as a checkout ----------------------

# 0.32's margin (each non-Mamba group's blocks for N tokens) back to 0.31's (the scheduler's
# block size, once).
PER_GROUP_MARGIN = """\
        self._spec_decode_step_blocks = sum(
            cdiv(num_spec_decode_tokens, manager.block_size)
            for manager in self.kv_cache_manager.coordinator.single_type_managers
            if not isinstance(manager.kv_cache_spec, MambaSpec)
        )
"""
ORIGINAL_MARGIN = (
    "        self._spec_decode_step_blocks = cdiv(num_spec_decode_tokens, self.block_size)\n"
)
SELECTED = ["cases/multiple_groups.yaml", "-m", "stock or fixed"]


def copy_as_checkout(root: Path) -> Path:
    """The installed vLLM's Python files (a source checkout has no compiled extensions). Their
    bytecode caches come along, valid for the copies (same times and sizes), so the runs do
    not compile vLLM again. Files are hard links where the filesystem allows: a file the test
    changes is unlinked first (see ``rewrite``)."""
    installed = Path(metadata.distribution("vllm").locate_file("vllm"))

    def not_python(directory: str, names: list[str]) -> list[str]:
        cache = Path(directory).name == "__pycache__"
        return [
            n
            for n in names
            if not (n.endswith(".py") or (cache and n.endswith(".pyc")))
            and not Path(directory, n).is_dir()
        ]

    def link(source: str, target: str) -> None:
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)

    shutil.copytree(installed, root / "vllm", ignore=not_python, copy_function=link)
    return root


def rewrite(path: Path, text: str) -> None:
    """Replaces ``path``'s text without touching a file it is a hard link to."""
    path.unlink()
    path.write_text(text)


def overlay_env(root: Path) -> Path:
    """A fresh environment that sees this one's packages (torch and the rest) after its own
    site-packages, so what it installs there comes first: as an env with the dependencies and
    no vLLM, the way ``tox -e vllmdev`` builds one."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # .pth files run in name order: "zz" puts this env's packages after the checkout's entry.
    here = sysconfig.get_paths()["purelib"]
    Path(site, "zz-matrix-base.pth").write_text(f"import site; site.addsitedir({here!r})\n")
    return python


def run_matrix(python: Path, report: Path) -> dict[str, Any]:
    subprocess.run(
        [python, "-m", "pytest", *SELECTED, "-p", "no:cacheprovider", f"--matrix-report={report}"],
        cwd=REPO,
        capture_output=True,
        timeout=600,
    )
    document: dict[str, Any] = json.loads(report.read_text())
    return document


@needs_vllm
@pytest.mark.slow
def test_a_checkout_runs_as_the_env_s_vllm(tmp_path: Path, inline: pytest.Pytester) -> None:
    from matrix.installed import installed_vllm_version
    from matrix.releases import shipped_variant

    if shipped_variant(installed_vllm_version()) != "fixed":
        pytest.skip("changes the per-group margin, which 0.32 and later ship")
    python = overlay_env(tmp_path / "env")
    checkout = copy_as_checkout(tmp_path / "checkout")
    selected = [str(REPO / SELECTED[0]), *SELECTED[1:]]
    inline.runpytest_inprocess(*selected, "-p", "no:cacheprovider", "--matrix-report=r.json")
    release = json.loads((inline.path / "r.json").read_text())

    scheduler = checkout / "vllm" / "v1" / "core" / "sched" / "scheduler.py"
    rewrite(scheduler, replaced(scheduler.read_text(), (PER_GROUP_MARGIN, ORIGINAL_MARGIN)))
    installed = subprocess.run(
        [python, "-m", "matrix.tools.devsource", str(checkout)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr
    changed = run_matrix(python, tmp_path / "changed.json")
    assert changed["source"] == {
        "path": str(checkout),
        "kind": "checkout",
        "commit": None,
        "dirty": None,
    }
    assert changed["vllm_version"] == release["vllm_version"]
    # The fix patched in replaces the stock margin on the instance: the checkout is driven
    # exactly as the release it was copied from.
    fixed = [c for c in changed["cells"] if c["variant"] == "fixed"]
    assert fixed == [c for c in release["cells"] if c["variant"] == "fixed"] and len(fixed) == 4
    stock = {
        c["case"]: (c["observed"], c["kind"], c["as_expected"])
        for c in changed["cells"]
        if c["variant"] == "stock"
    }
    # 0.31's margin is one group's: with two groups the stalls are back, against stock's
    # expectation (the fix's), and the full + full layout stalls too.
    assert stock["multiple_groups[k=1,layout=full+full]"] == ("fail", "stall", False)
    assert all(kind == "stall" for _, kind, _ in stock.values())


def make_wheel(directory: Path, version: str) -> Path:
    """A minimal wheel of a ``vllm`` package, as a nightly would be laid out."""
    dist_info = f"vllm-{version}.dist-info"
    files = {
        "vllm/__init__.py": "",
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: false\n"
        "Tag: cp311-cp311-linux_x86_64\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{dist_info}/RECORD,,\n"
    wheel = directory / f"vllm-{version}-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in {**files, f"{dist_info}/RECORD": record}.items():
            archive.writestr(name, text)
    return wheel


def test_a_wheel_installs_without_dependencies_and_names_its_source(tmp_path: Path) -> None:
    pytest.importorskip("installer")
    wheel = make_wheel(tmp_path, "0.34.0.dev2")
    site = tmp_path / "site"
    site.mkdir()
    assert install(wheel, site) == "0.34.0.dev2"
    assert (site / "vllm" / "__init__.py").is_file()
    source = source_of(metadata.PathDistribution(site / "vllm-0.34.0.dev2.dist-info"))
    assert source is not None and source.kind == "wheel" and source.path == str(wheel)
    # Installing again replaces what the first install put there.
    assert install(make_wheel(tmp_path, "0.34.0.dev3"), site) == "0.34.0.dev3"
    assert [p.name for p in site.glob("vllm-*.dist-info")] == ["vllm-0.34.0.dev3.dist-info"]


@pytest.mark.once
@needs_vllm
def test_matrix_cases_runs_the_shipped_cases_anywhere(pytester: pytest.Pytester) -> None:
    """``pytest --matrix-cases`` in a folder of its own collects the shipped cases, beside a
    folder of the user's."""
    (pytester.path / "mine").mkdir()
    (pytester.path / "mine" / "one.yaml").write_text(
        (REPO / "README.md").read_text().split("```yaml\n")[1].split("```")[0]
    )
    shipped = pytester.runpytest_inprocess("--matrix-cases", "--collect-only", "-q")
    ids = shipped.stdout.str()
    assert "single_group.yaml::single_group[k=1]-stock" in ids and "hybrid_swa" not in ids
    both = pytester.runpytest_inprocess("--matrix-cases", "mine", "--collect-only", "-q")
    assert "hybrid_swa" in both.stdout.str() and "single_group[k=1]-stock" in both.stdout.str()
