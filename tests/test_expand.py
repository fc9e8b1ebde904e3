"""Matrix expansion: stable, readable ids that depend only on the file's text."""

from __future__ import annotations

import re

import pytest

from matrix.case.expansion import Cell, cells_from_file
from matrix.case.loading import CaseFileError
from matrix.variant_names import VariantName
from tests.helpers import CASES, WriteCase, replaced

MULTI = """\
name: multi
column: Multiple groups
groups:
  - {kind: full, block_size: 4}
speculative: {method: eagle, num_tokens: 1}
pool: {start: 4, stop: 8}
requests:
  - {id: a, prompt: 16}
expect: {original: fail}
variants: [original, fixed]
matrix:
  k: {path: speculative.num_tokens, values: [1, 3]}
  layout:
    path: groups
    values:
      two: [{kind: full, block_size: 4}, {kind: full, block_size: 4}]
      swa: [{kind: full, block_size: 4}, {kind: sliding_window, block_size: 4, window: 8}]
"""


def test_ids_are_readable_and_ordered(write_case: WriteCase) -> None:
    ids = [cell.test_id for cell in cells_from_file(write_case(MULTI))]
    assert ids == [
        "multi[k=1,layout=two]-original",
        "multi[k=1,layout=two]-fixed",
        "multi[k=1,layout=swa]-original",
        "multi[k=1,layout=swa]-fixed",
        "multi[k=3,layout=two]-original",
        "multi[k=3,layout=two]-fixed",
        "multi[k=3,layout=swa]-original",
        "multi[k=3,layout=swa]-fixed",
    ]


def test_ids_are_stable_across_loads(write_case: WriteCase) -> None:
    path = write_case(MULTI)
    assert [c.test_id for c in cells_from_file(path)] == [c.test_id for c in cells_from_file(path)]


def test_axis_values_reach_the_case(write_case: WriteCase) -> None:
    cells = cells_from_file(write_case(MULTI))
    case = cells[-1].case
    assert case.definition.speculative is not None and case.definition.speculative.num_tokens == 3
    assert [g.kind for g in case.definition.groups] == ["full", "sliding_window"]
    assert case.column == "Multiple groups"
    assert "matrix" not in case.definition.model_fields_set


def test_expectations_per_variant(write_case: WriteCase) -> None:
    expected = {c.variant: c.expected for c in cells_from_file(write_case(MULTI))}
    assert expected == {"original": "fail", "fixed": "pass"}


def test_overlay_axis_sets_several_places(write_case: WriteCase) -> None:
    text = MULTI.split("matrix:")[0] + (
        "matrix:\n  k:\n    values:\n"
        '      "1": {speculative.num_tokens: 1, expect.fixed: fail}\n'
        '      "3": {speculative.num_tokens: 3}\n'
    )
    cells = cells_from_file(write_case(text))
    assert [(c.test_id, c.expected) for c in cells] == [
        ("multi[k=1]-original", "fail"),
        ("multi[k=1]-fixed", "fail"),
        ("multi[k=3]-original", "fail"),
        ("multi[k=3]-fixed", "pass"),
    ]


def test_an_axis_value_may_leave_the_case_as_written(write_case: WriteCase) -> None:
    """``null`` (or ``{}``) for an axis value without ``path``: the case as written, no dummy
    setting needed; anything else that is not a mapping is still refused at its line."""
    text = MULTI.split("matrix:")[0] + (
        "matrix:\n  k:\n    values:\n"
        "      base:\n"
        "      empty: {}\n"
        '      "3": {speculative.num_tokens: 3, expect.fixed: fail}\n'
    )
    cells = cells_from_file(write_case(text))
    assert [(c.test_id, c.expected) for c in cells] == [
        ("multi[k=base]-original", "fail"),
        ("multi[k=base]-fixed", "pass"),
        ("multi[k=empty]-original", "fail"),
        ("multi[k=empty]-fixed", "pass"),
        ("multi[k=3]-original", "fail"),
        ("multi[k=3]-fixed", "fail"),
    ]
    spec = cells[0].case.definition.speculative
    assert spec is not None and spec.num_tokens == 1  # as the case writes it
    with pytest.raises(CaseFileError, match=r"value 'base': an overlay is a mapping .*or null"):
        cells_from_file(write_case(text.replace("      base:\n", "      base: 3\n")))


def test_a_default_expectation_is_placed_at_the_cases_expect(write_case: WriteCase) -> None:
    """A cell held to pass by default (no entry for its variant) is reported at the case's
    ``expect:`` line, where its entry would go (else at its ``name:``), and says it is the
    default; a written one at its entry."""
    text = "# a comment first\n\n" + MULTI
    original, fixed = cells_from_file(write_case(text))[:2]
    assert original.line == fixed.line == text.splitlines().index("expect: {original: fail}") + 1
    assert original.case.states_expectation("original")
    assert not fixed.case.states_expectation("fixed")
    bare = text.replace("expect: {original: fail}\n", "")
    fixed = cells_from_file(write_case(bare))[1]
    assert fixed.line == bare.splitlines().index("name: multi") + 1


def test_shipped_ids_are_unique() -> None:
    ids = [c.test_id for path in sorted(CASES.glob("*.yaml")) for c in cells_from_file(path)]
    assert len(ids) == len(set(ids))
    assert "multiple_groups[k=1,layout=full+full]-original" in ids


STOCK_FOLLOWS = """\
name: s
groups:
  - {kind: full, block_size: 4}
pool: 20
requests:
  - {id: a, prompt: 8}
expect:
  default: fail
  original: stall
  fixed: pass
"""


def test_stock_is_held_to_the_variant_its_release_ships(write_case: WriteCase) -> None:
    path = write_case(STOCK_FOLLOWS)

    def stock(ships: VariantName) -> Cell:
        return next(c for c in cells_from_file(path, ships) if c.variant == "stock")

    assert (stock("original").expected, stock("original").line) == ("stall", 9)
    assert (stock("fixed").expected, stock("fixed").line) == ("pass", 10)
    assert (stock("none").expected, stock("none").line) == ("fail", 8)  # expect.default
    explicit = write_case(STOCK_FOLLOWS + "  stock: not_admitted\n", "explicit.yaml")
    cell = next(c for c in cells_from_file(explicit, "original") if c.variant == "stock")
    assert (cell.expected, cell.line) == ("not_admitted", 11)


WHEN = """\
name: when
groups:
  - {kind: full, block_size: 4}
speculative: {method: eagle, num_tokens: 1}
pool: 12
requests:
  - {id: a, prompt: 16}
expect: {none: stall}
variants: [none, original, fixed]
matrix:
  k:
    values:
      "1": {speculative.num_tokens: 1}
      "3": {speculative.num_tokens: 3, expect.original: stall}
  offset: {path: requests.0.prompt, values: {aligned: 16, past: 17, short: 15}}
when:
  - {k: "3", offset: past, expect: {none: pass, original: not_admitted}}
  - {offset: [short, past], expect: {fixed: not_admitted}}
"""


def test_when_applies_where_all_its_labels_hold(write_case: WriteCase) -> None:
    """Issue 19 item 4: an expectation of two axes together, without a flat axis of every
    combination; later entries win over the case's expect and the axes' overlays."""
    cells = {cell.test_id: cell for cell in cells_from_file(write_case(WHEN))}
    expected = {test_id: cell.expected for test_id, cell in cells.items()}
    assert expected["when[k=1,offset=aligned]-none"] == "stall"
    assert expected["when[k=3,offset=aligned]-original"] == "stall"  # the axis's overlay
    assert expected["when[k=3,offset=past]-none"] == "pass"  # the first entry
    assert expected["when[k=3,offset=past]-original"] == "not_admitted"
    assert expected["when[k=1,offset=past]-none"] == "stall"  # k=1: the first does not hold
    assert expected["when[k=1,offset=short]-fixed"] == "not_admitted"  # any label of a list
    assert expected["when[k=1,offset=aligned]-fixed"] == "pass"
    # A failing cell is reported at the line of the entry that set its expectation.
    assert cells["when[k=3,offset=past]-original"].line == 17
    assert cells["when[k=1,offset=short]-fixed"].line == 18


RELEASE_WHEN = """\
name: per_release
groups:
  - {kind: full, block_size: 4}
pool: 8
requests:
  - {id: a, prompt: 16}
variants: [none, fixed]
expect: {none: stall}
when:
  - {release: ["0.30", "0.34"], expect: {none: pass}}
"""


def test_a_when_entry_may_name_the_release_the_run_drives(
    write_case: WriteCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a release's own code changed is an expectation of that release alone; the other
    releases keep the case's, and the case is the same case on both (its digest)."""
    import matrix.case.expansion as expansion

    path = write_case(RELEASE_WHEN)
    seen = {}
    for release in ("0.33", "0.34"):
        monkeypatch.setattr(expansion, "installed_release", lambda release=release: release)
        cells = {cell.test_id: cell for cell in cells_from_file(path)}
        seen[release] = cells["per_release-none"]
    assert seen["0.33"].expected == "stall" and seen["0.34"].expected == "pass"
    assert seen["0.34"].line == 10  # the entry that set it
    assert seen["0.33"].case.digest == seen["0.34"].case.digest


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ('release: ["0.30", "0.34"]', 'release: "0.29"'),
            "when.0.release: axis 'release' has no label '0.29' (its labels: 0.30, 0.31",
        ),
        (
            (
                "variants: [none, fixed]",
                "variants: [none]\nmatrix:\n  release: {path: pool, values: [8]}",
            ),
            "'release' is the release a run drives, in when: entries: name the axis otherwise",
        ),
    ],
)
def test_the_release_axis_is_checked(
    write_case: WriteCase, change: tuple[str, str], message: str
) -> None:
    with pytest.raises(CaseFileError, match=re.escape(message)):
        cells_from_file(write_case(replaced(RELEASE_WHEN, change)))
