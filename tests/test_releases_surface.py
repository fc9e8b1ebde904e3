"""The surface list (matrix/adapters/surface/): each use in words, the adapters' requirements
made from it, the probe's reading of a class (on classes of this file, and on the installed
vLLM against its committed record), and the differences between two records, a line each."""

from __future__ import annotations

import copy
import sys
import types
from typing import Any

import pytest

from matrix.adapters import surface
from matrix.adapters.surface import SURFACE, Use
from matrix.adapters.surface_changes import changes, report
from matrix.adapters.surface_probe import (
    assigned_names,
    body_digest,
    holds,
    member_kind,
    parameters,
    read_snapshot,
    record_target,
    snapshot_path,
)
from tests.helpers import REPO, needs_vllm


def test_a_use_says_what_it_needs_as_a_refusal_names_it() -> None:
    assert surface.RESERVATION.describe() == (
        "Scheduler._inflight_prefill_reserved_blocks() (the async-load reservation variants "
        "replace)"
    )
    assert surface.RUNNER_OUTPUT_034.describe() == (
        "ModelRunnerOutput(req_ids, sampled_token_ids, kv_connector_output) without "
        "req_id_to_index (0.34's, the scheduler indexing req_ids itself)"
    )
    assert surface.PARKED_RESERVATIONS.describe().startswith(
        "Scheduler._parked_reservations (set by __init__)"
    )


def test_each_target_is_a_module_and_a_name_in_it() -> None:
    for use in SURFACE:
        assert use.module.startswith("vllm") and use.qualname, use.target
        assert use.qualname.split(".")[0][0].isalpha(), use.target


# Classes of this file, as the probe reads vLLM's: a release before and after a change.


class OldScheduler:
    """A scheduler of the release before."""

    margin = 0

    def __init__(self, config: Any, hash_block_size: int, log_stats: bool = False) -> None:
        self.requests: dict[str, Any] = {}
        self.waiting, self.running = [], []  # type: ignore[var-annotated]
        self._inflight: set[str] = set()

    def schedule(self) -> int:
        """Schedules."""
        return 1

    def reserved(self) -> int:
        return len(self._inflight)


class NewScheduler:
    """The same scheduler, a release later."""

    def __init__(self, config: Any, log_stats: bool, *, hash_block_size: int = 16) -> None:
        self.requests: dict[str, Any] = {}
        self.waiting, self.running = [], []  # type: ignore[var-annotated]
        self._parked: dict[str, int] = {}

    def schedule(self) -> int:
        # A comment and another docstring change nothing the digest sees.
        return 1

    def reserved(self) -> int:
        return len(self._parked)

    @property
    def margin(self) -> int:
        return 0


def test_the_probe_reads_parameters_members_and_what_init_sets() -> None:
    assert parameters(OldScheduler) == ("config", "hash_block_size", "log_stats=")
    assert parameters(NewScheduler) == ("config", "log_stats", "hash_block_size=")
    assert assigned_names(OldScheduler) == {"requests", "waiting", "running", "_inflight"}
    assert member_kind(OldScheduler, "margin") == "attribute"
    assert member_kind(NewScheduler, "margin") == "property"
    assert member_kind(OldScheduler, "schedule") == "method"
    assert member_kind(OldScheduler, "_inflight") == "assigned"
    assert member_kind(NewScheduler, "_inflight") == "absent"
    # The code as written: not its comments or docstring.
    assert body_digest(OldScheduler.schedule) == body_digest(NewScheduler.schedule)
    assert body_digest(OldScheduler.reserved) != body_digest(NewScheduler.reserved)


@pytest.fixture
def release(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A module standing for vLLM's scheduler module, its Scheduler the old one."""
    module = types.ModuleType("vllm.fake_scheduler")
    module.Scheduler = OldScheduler  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def test_a_use_holds_where_the_release_has_what_it_states(release: types.ModuleType) -> None:
    target = "vllm.fake_scheduler:Scheduler"
    held = [
        Use(target, "", parameters=("hash_block_size",)),
        Use(target, "", methods=("schedule", "reserved")),
        Use(target, "", assigned=("_inflight",)),
        Use(target, "", attributes=("margin", "requests")),
        Use(target, "", without=("_parked",)),
        Use(f"{target}.schedule", ""),
    ]
    assert all(holds(use) for use in held)
    missing = [
        Use(target, "", parameters=("block_size",)),
        Use(target, "", methods=("requests",)),  # set by __init__, not a method
        Use(target, "", assigned=("schedule",)),
        Use(target, "", attributes=("_parked",)),
        Use(target, "", without=("_inflight",)),
        Use("vllm.fake_scheduler:Gone", ""),
        Use("vllm.no_such_module_here:Scheduler", ""),
    ]
    assert not any(holds(use) for use in missing)
    release.Scheduler = NewScheduler  # type: ignore[attr-defined]
    assert not holds(Use(target, "", assigned=("_inflight",)))
    assert holds(Use(target, "", assigned=("_parked",), parameters=("hash_block_size",)))


def records(release: types.ModuleType, uses: tuple[Use, ...]) -> tuple[dict[str, Any], ...]:
    """The target recorded on the old scheduler, then on the new one."""
    made = []
    for version, scheduler in (("1.0.0", OldScheduler), ("1.1.0", NewScheduler)):
        release.Scheduler = scheduler  # type: ignore[attr-defined]
        entry = record_target("vllm.fake_scheduler:Scheduler", uses)
        made.append({"vllm": version, "targets": {"vllm.fake_scheduler:Scheduler": entry}})
    return tuple(made)


def test_the_differences_are_a_line_each_what_the_adapters_use_first(
    release: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = "vllm.fake_scheduler:Scheduler"
    uses = (
        Use(target, "built", parameters=("config", "hash_block_size")),
        Use(target, "stepped", methods=("schedule", "reserved"), assigned=("_inflight",)),
    )
    monkeypatch.setattr(surface, "SURFACE", uses)
    old, new = records(release, uses)
    found = {(c.line(), c.used) for c in changes(old, new)}
    assert found == {
        (f"{target}: parameter hash_block_size now has a default", True),
        (f"{target}: parameter log_stats now required (it had a default)", True),
        (f"{target}.margin: now a property (was an attribute)", False),
        (f"{target}._inflight: gone (was an attribute __init__ sets)", True),
        (f"{target}.reserved: its code changed", True),
        (f"{target}: __init__ now sets self._parked", False),
    }
    printed = report(old, new)
    assert printed[0].startswith("vLLM 1.0.0 -> 1.1.0: 6 differences")
    assert printed[1] == "What the adapters use (4):"
    assert printed[6] == "Beside it, on the same targets (2):"
    assert changes(old, copy.deepcopy(old)) == []


def test_a_target_gone_moved_or_new_is_one_line(
    release: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "ProbedOnlyHereScheduler"  # no vLLM module defines one
    target = f"vllm.fake_scheduler:{name}"
    uses = (Use(target, "built"),)
    monkeypatch.setattr(surface, "SURFACE", uses)
    monkeypatch.setattr(release, name, OldScheduler, raising=False)
    old = {"vllm": "1.0.0", "targets": {target: record_target(target, uses)}}
    monkeypatch.delattr(release, name)
    moved = types.ModuleType("vllm.fake_scheduler_core")
    setattr(moved, name, type(name, (), {"__module__": moved.__name__}))
    monkeypatch.setitem(sys.modules, moved.__name__, moved)
    gone = {"vllm": "1.1.0", "targets": {target: record_target(target, uses)}}
    (change,) = changes(old, gone)
    assert change.line() == (
        f"{target}: moved to vllm.fake_scheduler_core (vllm.fake_scheduler has no {name})"
    )
    (back,) = changes(gone, old)
    assert back.line().startswith(f"{target}: new (")
    (grown,) = changes({"vllm": "1.0.0", "targets": {}}, old)
    assert grown.line() == f"{target}: not in 1.0.0's record (record it again)"


def test_docs_show_what_the_probe_prints_for_the_newest_release() -> None:
    """docs/releases.md's list for 0.34.0 is the committed records' differences."""
    text = (REPO / "docs" / "releases.md").read_text(encoding="utf-8")
    start = text.index("```\n", text.index("### What it printed for 0.34.0")) + len("```\n")
    shown = text[start : text.index("```\n", start)].splitlines()
    old, new = (read_snapshot(snapshot_path(v)) for v in ("0.33.0", "0.34.0"))
    assert shown == report(old, new)


@needs_vllm
def test_every_requirement_of_every_adapter_is_an_entry_of_the_surface_list() -> None:
    """The adapters' requirements state nothing the list does not: each is a use's."""
    import importlib

    from matrix.adapters.patched import Patched
    from matrix.releases import RELEASES

    described = {use.describe() for use in SURFACE}
    adapters = {Patched}
    for release in RELEASES.values():
        module, name = release.adapter.split(":")
        adapters.add(getattr(importlib.import_module(module), name))
    for adapter in adapters:
        own = [r.description for r in adapter.requirements if r.description not in described]
        # The patched tree's own requirement is the patch: no release has it.
        assert len(own) == (adapter is Patched), (adapter.__name__, own)


@needs_vllm
@pytest.mark.once
def test_the_newest_release_has_every_use_but_the_older_releases_own() -> None:
    """The list names nothing the newest release lacks, but what only older adapters drive:
    a misspelt name in it fails here."""
    from matrix.installed import installed_vllm_version
    from matrix.releases import newest_release, release_of

    if release_of(str(installed_vllm_version())) != newest_release():
        pytest.skip("the installed vLLM is not the newest release")
    older = {surface.INDEXED_RUNNER_OUTPUT, surface.NO_SPEC_MARGIN, surface.SPEC_MARGIN_METHOD}
    lacking = [use.describe() for use in SURFACE if use not in older and not holds(use)]
    assert lacking == []


@needs_vllm
def test_the_installed_release_is_as_its_committed_record_says() -> None:
    """The record of the installed release, written by ``python -m matrix releases --record``
    in its env, is what the probe reads now: a list grown or a record gone stale fails."""
    from matrix.adapters.surface_probe import record
    from matrix.installed import installed_vllm_version

    version = str(installed_vllm_version())
    path = snapshot_path(version)
    assert path.is_file(), f"no record of vLLM {version}: run python -m matrix releases --record"
    recorded = read_snapshot(path)
    fresh = record(version)
    assert [c.line() for c in changes(recorded, fresh)] == []
    assert fresh == recorded
