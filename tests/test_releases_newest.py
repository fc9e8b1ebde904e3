""" "The newest release" is stated once, by the release table (matrix/releases.py): the commands
that name a release's env without vLLM installed name the newest's, and what tox.ini (which
cannot read the table) says of the newest is checked against it."""

from __future__ import annotations

import configparser

import pytest

import matrix.installed
from matrix.__main__ import main
from matrix.adapters import selection
from matrix.adapters.protocol import UnsupportedRelease
from matrix.release_process.pins import pinned_versions
from matrix.releases import RELEASES, Release, env_name, newest_release, shipped_variant
from matrix.runner import command as runner
from matrix.sweep import command as sweep
from tests.helpers import REPO


def test_the_newest_release_is_the_table_s(monkeypatch: pytest.MonkeyPatch) -> None:
    assert newest_release() == max(RELEASES, key=lambda r: tuple(map(int, r.split("."))))
    assert env_name("0.34") == "vllm034" and env_name("0.34", "sweep") == "sweep034"
    monkeypatch.setitem(RELEASES, "0.99", Release("matrix.adapters.v0_34:Vllm034", "proposed"))
    assert newest_release() == "0.99"
    assert shipped_variant(None) == "proposed"  # the newest's, where no vLLM says otherwise


@pytest.fixture
def no_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM not installed, as each command sees it."""
    for module in (matrix.installed, runner, sweep, selection):
        monkeypatch.setattr(module, "installed_vllm_version", lambda: None)


@pytest.mark.parametrize(
    ("argv", "family"),
    [(["run"], "vllm"), (["sweep"], "sweep"), (["upstream"], "upstream")],
)
def test_a_command_without_vllm_names_the_newest_release_s_env(
    no_vllm: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    family: str,
) -> None:
    monkeypatch.setitem(RELEASES, "0.99", RELEASES[newest_release()])
    assert main(argv) == 2
    assert f"(use tox -e {family}099)" in capsys.readouterr().err


def test_selecting_an_adapter_without_vllm_names_the_newest_release_s_env(
    no_vllm: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(RELEASES, "0.99", RELEASES[newest_release()])
    with pytest.raises(UnsupportedRelease, match=r"tox -e vllm099\)"):
        selection.adapter_class()


def test_tox_s_defaults_name_the_newest_release() -> None:
    """The main job's env and a dev build's dependencies: the newest release's."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    newest = newest_release()
    assert tox["tox"]["env_list"].strip() == env_name(newest)
    pinned = pinned_versions(REPO / "requirements")[newest]
    assert f"VLLM_DEV_DEPS:{pinned}" in tox["testenv:vllmdev"]["deps"]
