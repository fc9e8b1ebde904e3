"""A user's own variants: loaded from a module or an entry point, checked, named in cases,
run beside the built-ins into every table and the JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from matrix.case.expansion import cells_from_file
from matrix.case.loading import CaseFileError
from matrix.run.user_variants import VariantLoadError, load_reference, run_variants
from matrix.variant_names import VARIANT_NAMES
from tests.helpers import REPO, TWO_GROUP_CASE, WriteCase, needs_vllm, replaced

# A variant as a user writes one: the fix's rule under another name, and one that reserves
# a whole pool's worth, which can never admit anything.
MODULE = """\
from dataclasses import dataclass

from matrix.run.variants import VARIANTS


@dataclass(frozen=True)
class Renamed:
    name: str

    def apply(self, handle):
        VARIANTS["fixed"].apply(handle)


@dataclass(frozen=True)
class Greedy:
    name: str = "greedy"

    def apply(self, handle):
        handle.install_reservation(
            admission_margin=1000, per_request_margin=0, spec_tokens_through_coordinator=True
        )


MINE = Renamed("mine")
GREEDY = Greedy()
TAKEN = Renamed("fixed")
NOT_A_VARIANT = 3
"""
CASE = replaced(
    TWO_GROUP_CASE,
    ("pool: {start: 8, stop: 14}", "pool: {start: 8, stop: 12}"),
    (
        "expect: {none: fail, original: fail}",
        "expect: {default: pass, none: fail, original: fail, greedy: not_admitted}",
    ),
)


@pytest.fixture
def module(tmp_path: Path) -> Path:
    path = tmp_path / "my_variants.py"
    path.write_text(MODULE)
    return path


def test_a_variant_loads_from_a_file_or_a_module(
    module: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert load_reference(f"{module}:MINE").name == "mine"
    monkeypatch.syspath_prepend(str(module.parent))
    assert load_reference("my_variants:GREEDY").name == "greedy"
    assert list(run_variants([f"{module}:MINE"])) == [*VARIANT_NAMES, "mine"]


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("no_colon", "write package.module:NAME"),
        ("{module}:MISSING", "cannot load"),
        ("{module}:NOT_A_VARIANT", "not a variant"),
        ("{module}:TAKEN", "'fixed' is taken by a built-in"),
        ("no_such_module_here:X", "cannot load"),
    ],
)
def test_a_bad_reference_is_one_line(module: Path, reference: str, message: str) -> None:
    with pytest.raises(VariantLoadError, match=message) as error:
        run_variants([reference.format(module=module)])
    assert "\n" not in str(error.value)


def test_one_name_twice_is_refused(module: Path) -> None:
    with pytest.raises(VariantLoadError, match="'mine' repeats"):
        run_variants([f"{module}:MINE", f"{module}:MINE"])


def test_cases_name_known_variants_only(write_case: WriteCase) -> None:
    path = write_case(CASE)
    with pytest.raises(CaseFileError) as error:
        cells_from_file(path)  # without the run's greedy variant
    assert error.value.line == 10 and "unknown variant 'greedy'" in error.value.message
    cells = cells_from_file(path, variants=(*VARIANT_NAMES, "greedy", "mine"))
    expected = {c.variant: c.expected for c in cells}
    # Its own entry holds greedy; mine is not named, so it expects pass whatever default says.
    assert expected["greedy"] == "not_admitted" and expected["mine"] == "pass"
    greedy = next(c for c in cells if c.variant == "greedy")
    assert greedy.line == 10


def test_a_case_that_lists_its_variants_runs_only_those(write_case: WriteCase) -> None:
    path = write_case(replaced(CASE, ("expect:", "variants: [stock, fixed]\nexpect:")))
    cells = cells_from_file(path, variants=(*VARIANT_NAMES, "greedy"))
    assert [c.variant for c in cells] == ["stock", "fixed"]


@pytest.mark.once
@needs_vllm
def test_a_variant_from_a_temporary_folder_is_in_the_tables_and_json(
    inline: pytest.Pytester, module: Path
) -> None:
    (inline.path / "cases").mkdir()
    (inline.path / "cases" / "small.yaml").write_text(CASE)
    inline.makefile(".ini", pytest="[pytest]\nmatrix_cases = cases\n")
    result = inline.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        f"--matrix-variant={module}:MINE",
        f"--matrix-variant={module}:GREEDY",
        "--matrix-report=r.json",
        "--matrix-report=r.md",
        "--matrix-full-terminal",  # the case table too, which a report file would hold
        "-m",
        "fixed or mine or greedy",
    )
    result.assert_outcomes(passed=3)
    # After the built-ins, a user's variants come in name order, in every table.
    result.stdout.fnmatch_lines(["*This fix*Pass*", "greedy*Fail*", "mine*Pass*"])
    result.stdout.fnmatch_lines(
        ["case*fixed*greedy*mine*", "small*pass*not_admitted: over_reservation*pass*"]
    )
    cells = json.loads((inline.path / "r.json").read_text())["cells"]
    by_variant = {c["variant"]: c for c in cells}
    assert by_variant["mine"]["observed"] == "pass"
    assert by_variant["greedy"]["kind"] == "not_admitted" and by_variant["greedy"]["as_expected"]
    # The renamed fix is the fix: the same verdict, fit and diagnosis.
    fields = ("observed", "kind", "fit", "failing_pools", "detail")
    assert [by_variant["mine"][f] for f in fields] == [by_variant["fixed"][f] for f in fields]
    assert "| mine | Pass |" in (inline.path / "r.md").read_text()


@needs_vllm
def test_a_bad_variant_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--matrix-variant=nowhere:X")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--matrix-variant: nowhere:X: cannot load*"])


def test_the_example_tight_variant_loads_without_vllm() -> None:
    assert load_reference(f"{REPO}/docs/examples/tight_variant.py:TIGHT").name == "tight"


def test_validate_knows_the_variants_it_is_given(
    write_case: WriteCase, module: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from matrix.__main__ import main

    path = write_case(CASE)
    assert main(["validate", str(path)]) == 1
    assert f"{path}:10: expect.greedy: unknown variant 'greedy'" in capsys.readouterr().out
    assert main(["validate", str(path), "--variant", f"{module}:GREEDY"]) == 0
    assert "ok, 8 cells" in capsys.readouterr().out


def test_an_installed_package_declares_variants_by_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    (site / "my_rules-1.0.dist-info").mkdir(parents=True)
    (site / "my_rules.py").write_text(MODULE)
    (site / "my_rules-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: my-rules\nVersion: 1.0\n"
    )
    (site / "my_rules-1.0.dist-info" / "entry_points.txt").write_text(
        "[matrix.variants]\ngreedy = my_rules:GREEDY\n"
    )
    monkeypatch.syspath_prepend(str(site))
    assert list(run_variants([])) == [*VARIANT_NAMES, "greedy"]
    with pytest.raises(VariantLoadError, match=r"'greedy' repeats \(first: entry point greedy"):
        run_variants(["my_rules:GREEDY"])
