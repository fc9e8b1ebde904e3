"""The findings' patches to vLLM's source (``tox -e patched034``): the patched tree, made once per
patch from a release's unpacked archive; the adapter that drives a scheduler carrying it; and
the check that its stock equals ``proposed`` on the unpatched release, from reports alone."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from matrix.findings.compare import load_one, main, patch_fidelity
from matrix.findings.tree import apply, patched_tree, release_patches
from matrix.tools.devsource import SourceError
from matrix.upstream.source import MARKER
from tests.helpers import needs_vllm

PATCH = """A header the patch tool skips.

--- a/vllm/core.py
+++ b/vllm/core.py
@@ -1,2 +1,2 @@
 def margin():
-    return 1
+    return 0
"""


@pytest.fixture
def archive_tree(tmp_path: Path) -> Path:
    """A release's unpacked tree as ``fetch_tree`` caches it (so nothing is downloaded)."""
    tree = tmp_path / "cache" / "vllm-9.9.9-tree"
    (tree / "vllm").mkdir(parents=True)
    (tree / "vllm" / "core.py").write_text("def margin():\n    return 1\n")
    (tree / MARKER).write_text(json.dumps({"filename": "vllm-9.9.9.tar.gz", "sha256": "ab"}))
    return tree


SECOND = """A second fix, applied after the first.

--- a/vllm/core.py
+++ b/vllm/core.py
@@ -1,2 +1,3 @@
 def margin():
     return 0
+# fixed
"""


def test_the_patched_tree_is_made_once_per_list_of_patches(
    archive_tree: Path, tmp_path: Path
) -> None:
    first, second = tmp_path / "1-first.patch", tmp_path / "2-second.patch"
    first.write_text(PATCH)
    second.write_text(SECOND)
    root = archive_tree.parent
    tree = patched_tree("9.9.9", [first, second], root)
    assert (tree / "vllm" / "core.py").read_text() == "def margin():\n    return 0\n# fixed\n"
    assert (archive_tree / "vllm" / "core.py").read_text().endswith("return 1\n")  # untouched
    record = json.loads((tree / MARKER).read_text())
    assert (record["filename"], record["patches"]) == (
        "vllm-9.9.9.tar.gz",
        ["1-first.patch", "2-second.patch"],
    )
    assert patched_tree("9.9.9", [first, second], root) == tree
    assert patched_tree("9.9.9", [first], root) != tree  # another list: another tree
    first.write_text(PATCH + "\n")  # an edited patch: another tree
    assert patched_tree("9.9.9", [first, second], root) != tree
    with pytest.raises(SourceError, match=r"no patches for vLLM 9\.9\.9"):
        patched_tree("9.9.9", [], root)


def test_a_patch_that_does_not_apply_changes_nothing(archive_tree: Path, tmp_path: Path) -> None:
    patch = tmp_path / "bad.patch"
    patch.write_text(PATCH.replace("return 1", "return 2", 1) + PATCH.replace("core", "gone"))
    with pytest.raises(SourceError, match=r"bad\.patch does not apply"):
        apply(patch, archive_tree)
    assert (archive_tree / "vllm" / "core.py").read_text().endswith("return 1\n")


PATCHED_RELEASES = ("0.31.0", "0.32.0", "0.33.0", "0.34.0")
# Findings 3 and 6 are one miscount of the admitting load: one patch, both findings' tests.
ADMISSION_TESTS = (
    "test_async_load_is_admitted_in_a_pool_the_engine_starts_with",
    "test_async_load_is_admitted_only_if_it_can_be_promoted",
)


def test_every_patched_release_has_a_patch_per_fix_each_with_its_vllm_test() -> None:
    for version in PATCHED_RELEASES:
        patches = release_patches(version)
        assert [p.name.split("-", 1)[0] for p in patches] == ["1", "2", "3", "4"], version
        for patch in patches:
            text = patch.read_text()
            description = text.split("\ndiff --git ", 1)[0]
            tested = re.search(r"^Test: (tests/v1/\S+\.py)$", text, re.M)
            assert tested, (version, patch.name)
            assert f"diff --git a/{tested.group(1)} " in text, (version, patch.name)
            # A pull request's description carries its own numbers: no pointer elsewhere.
            assert "findings.md" not in description and "kv-matrix" not in description
        admission = patches[2].read_text()
        for test in ADMISSION_TESTS:
            assert f"+def {test}(" in admission and test in admission.split("diff --git")[0]
    assert release_patches("0.30.0") == []


def cell(case: str, variant: str, kind: str = "finished", pools: tuple[int, ...] = ()) -> Any:
    return {
        "case": case,
        "column": "Single group",
        "variant": variant,
        "expected": "pass",
        "expected_kind": None,
        "observed": "fail" if pools else "pass",
        "kind": kind,
        "detail": f"{kind} at pools {pools}",
        "source": "x.yaml:1",
        "as_expected": True,
        "fit": 11,
        "failing_pools": list(pools),
    }


def report(path: Path, cells: list[Any], patched: bool) -> Path:
    data: dict[str, Any] = {"vllm_version": "0.33.0", "matrix_digest": "code1", "cells": cells}
    if patched:
        data["source"] = {"path": "/cache/vllm-0.33.0-patched-x", "kind": "checkout"}
    path.write_text(json.dumps(data))
    return path


def test_stock_with_the_patch_is_compared_case_by_case_with_proposed(tmp_path: Path) -> None:
    unpatched = report(
        tmp_path / "vllm-0.33.0.json",
        [cell("a", "proposed"), cell("b", "proposed", "stall", (7,)), cell("a", "stock")],
        patched=False,
    )
    same = report(
        tmp_path / "same.json", [cell("a", "stock"), cell("b", "stock", "stall", (7,))], True
    )
    result = patch_fidelity(load_one(same), load_one(unpatched))
    assert (result.status, result.compared) == ("equal", 2)
    other = report(tmp_path / "other.json", [cell("a", "stock"), cell("b", "stock")], True)
    result = patch_fidelity(load_one(other), load_one(unpatched))
    assert result.status == "differs"
    assert result.differences[0].startswith("b: observed: patched 'fail' vs stock 'pass'")
    assert main([str(other), str(unpatched)]) == 1
    assert "DIFFERS" in (tmp_path / "fidelity-0.33.0.md").read_text()
    # The two reports the wrong way round: not run, not equal.
    assert main([str(unpatched), str(same)]) == 2


@needs_vllm
@pytest.mark.parametrize("count", ["_request_remaining_blocks", "_num_blocks_to_promote"])
def test_a_scheduler_carrying_the_patch_is_driven_by_the_release_s_patched_adapter(
    monkeypatch: pytest.MonkeyPatch, count: str
) -> None:
    """The patch's count takes the admission's hit: ``_request_remaining_blocks`` on 0.31-0.33,
    ``_num_blocks_to_promote`` on 0.34; either way the release's patched adapter drives it, and
    a variant's margin replaces the admitting request's count, never a load in flight's."""
    from vllm.v1.core.sched.scheduler import Scheduler

    from matrix.adapters.patched import PatchedAdmission, patched_adapter
    from matrix.adapters.selection import adapter_class, select_adapter

    release = adapter_class()
    assert not issubclass(release.handle_type, PatchedAdmission)

    def counted(
        self: Any,
        request: Any,
        new_computed_blocks: Any = None,
        num_new_local_computed_tokens: int = 0,
        num_external_computed_tokens: int = 0,
    ) -> int:
        return 3 + num_external_computed_tokens

    monkeypatch.setattr(Scheduler, count, counted, raising=False)
    patched = adapter_class()
    assert patched is patched_adapter(release) and issubclass(patched, release)
    assert isinstance(select_adapter(), patched)
    handle_type = patched.handle_type
    assert issubclass(handle_type, PatchedAdmission)
    # The release's worker and in-flight loads (0.34's parked ones), the patch's count.
    assert handle_type.worker_type is release.handle_type.worker_type
    assert handle_type.inflight_loads is release.handle_type.inflight_loads
    scheduler = type("S", (), {count: counted})()
    handle = handle_type.adopt(scheduler)
    assert handle.stock_margin() == 0
    handle.drop_stock_margin()  # a variant's margin replaces the admitting request's count
    assert getattr(handle.scheduler, count)("request", None, 0, 16) == 0
    assert getattr(handle.scheduler, count)("request") == 3  # a load in flight


@needs_vllm
def test_each_release_s_patched_adapter_keeps_what_the_release_drives_but_its_margin() -> None:
    from matrix.adapters.patched import PATCH, Patched, Patched034, patched_adapter
    from matrix.adapters.v0_31 import Vllm031
    from matrix.adapters.v0_32 import SPEC_STEP_ATTRIBUTE, Vllm032
    from matrix.adapters.v0_34 import Vllm034, Vllm034Handle

    assert [patched_adapter(a) for a in (Vllm031, Vllm032, Vllm034)] == [
        Patched,
        Patched,
        Patched034,
    ]
    for adapter, release in ((Patched, Vllm032), (Patched034, Vllm034)):
        assert SPEC_STEP_ATTRIBUTE not in adapter.requirements
        assert adapter.requirements[-1] is PATCH
        kept = [r for r in release.requirements if r is not SPEC_STEP_ATTRIBUTE]
        assert list(adapter.requirements[:-1]) == kept
    # 0.34's worker output and parked loads' reservations, from 0.34's handle.
    assert Patched034.handle_type.worker_type is Vllm034Handle.worker_type
    assert Patched034.handle_type.inflight_loads is Vllm034Handle.inflight_loads


def test_stock_is_held_to_the_variant_matrix_stock_as_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from matrix.installed import STOCK_AS, stock_expectation

    monkeypatch.delenv(STOCK_AS, raising=False)
    assert stock_expectation("0.33.0", None) == "fixed"
    monkeypatch.setenv(STOCK_AS, "proposed")
    assert stock_expectation("0.33.0", None) == "proposed"
    monkeypatch.setenv(STOCK_AS, "tight")
    with pytest.raises(ValueError, match=r"MATRIX_STOCK_AS=tight: not a built-in variant"):
        stock_expectation("0.33.0", None)
