"""Choosing the adapter for the installed vLLM, and refusing a release it cannot drive."""

from __future__ import annotations

import configparser

import pytest

from matrix.adapters.protocol import UnsupportedRelease
from matrix.adapters.selection import select_adapter
from matrix.installed import installed_vllm_version
from matrix.releases import (
    RELEASES,
    nearest_release,
    release_key,
    release_label,
    shipped_variant,
)
from tests.helpers import REPO, needs_vllm


def test_each_release_ships_the_variant_it_introduced() -> None:
    assert {r: RELEASES[r].ships for r in RELEASES} == {
        "0.30": "none",
        "0.31": "original",
        "0.32": "fixed",
        "0.33": "fixed",
        "0.34": "fixed",
    }
    assert shipped_variant("0.31.0") == "original"
    assert shipped_variant("0.31.2+cpu") == "original"


def test_an_unknown_release_is_driven_as_the_nearest_older_one() -> None:
    newest = max(RELEASES, key=release_key)
    major, minor = release_key(newest)
    unknown = f"{major}.{minor + 1}.0"
    assert nearest_release(f"{unknown}.dev12+g1234") == newest
    assert nearest_release("1.2.0") == newest
    assert nearest_release("0.33.1") == "0.33"
    assert nearest_release("0.29.1") == "0.30"  # nothing older: the oldest adapter is probed
    assert release_label("0.33.0") == "0.33.0"
    assert release_label(unknown) == f"{unknown} (unknown release, driven by the {newest} adapter)"


def test_every_release_has_a_tox_env_and_pinned_requirements() -> None:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini", encoding="utf-8")
    for release in RELEASES:
        env = "vllm" + release.replace(".", "")
        assert f"testenv:{env}" in tox
        assert env in tox["tox"]["labels"].split("releases =")[1].splitlines()[0]
        assert env in tox["testenv:crossversion"]["depends"]
        for name in (f"vllm-{release}.0.txt", f"vllm-{release}.0-nodeps.txt"):
            assert (REPO / "requirements" / name).is_file(), name


@needs_vllm
def test_the_installed_release_is_driven() -> None:
    adapter = select_adapter()
    assert adapter.release[0].isdigit()


@needs_vllm
def test_a_release_without_a_needed_feature_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from vllm.v1.core.sched.scheduler import Scheduler

    monkeypatch.delattr(Scheduler, "_inflight_prefill_reserved_blocks")
    with pytest.raises(UnsupportedRelease, match=r"lacks .*_inflight_prefill_reserved_blocks"):
        select_adapter()


@needs_vllm
def test_an_older_unknown_release_is_refused_naming_the_difference() -> None:
    # The installed release has a speculative-decode margin, which 0.30's adapter cannot drive.
    if shipped_variant(installed_vllm_version()) == "none":
        pytest.skip("the installed release is 0.30")
    with pytest.raises(UnsupportedRelease, match=r"0\.29\.1 lacks .*_spec_decode_step_blocks"):
        select_adapter("0.29.1")


MAMBA_ALL = """\
name: m
groups:
  - {kind: full, block_size: 4}
  - {kind: mamba, block_size: 4, mamba_mode: all}
pool: 40
requests:
  - {id: a, prompt: 8}
variants: [stock, fixed]
"""


@needs_vllm
def test_a_mamba_mode_the_release_lacks_skips_the_case(inline: pytest.Pytester) -> None:
    """Mode "all" exists in 0.30 and 0.31 only: later releases skip the case, naming it."""
    inline.makefile(".yaml", case=MAMBA_ALL)
    result = inline.runpytest_inprocess("case.yaml", "-rs")
    if shipped_variant(installed_vllm_version()) in ("none", "original"):
        result.assert_outcomes(passed=2)
    else:
        result.assert_outcomes(skipped=2)
        result.stdout.fnmatch_lines(
            [
                "SKIPPED [[]2[]] case.yaml:1: vLLM * "
                "has no Mamba cache mode 'all' (it has: align, none)"
            ]
        )


@needs_vllm
def test_cells_skip_with_the_reason_when_the_release_cannot_be_driven(
    inline: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release without what the adapter drives: every cell skips, naming it, and the report
    says so; nothing fails with an AttributeError."""
    from vllm.v1.core.sched.scheduler import Scheduler

    monkeypatch.delattr(Scheduler, "_inflight_prefill_reserved_blocks")
    inline.makefile(
        ".yaml",
        case="name: c\ngroups:\n  - {kind: full, block_size: 4}\n"
        "pool: 40\nrequests:\n  - {id: a, prompt: 8}\nvariants: [stock, fixed]\n",
    )
    result = inline.runpytest_inprocess("case.yaml", "-rs", "--matrix-report=r.json")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(
        ["SKIPPED [[]2[]] case.yaml:1: vLLM * lacks what the 0.3* adapter drives: Scheduler._inf*"]
    )
    assert "AttributeError" not in result.stdout.str()
    import json

    cells = json.loads((inline.path / "r.json").read_text())["cells"]
    assert {(c["variant"], c["observed"]) for c in cells} == {("stock", "skip"), ("fixed", "skip")}
