"""``python -m matrix record-expectations``: a report's observed verdicts written into the case
files as minimal text edits (the rest of the file as it was, comments included), each file
checked once edited. The reports here are written from the cells' own ids and digests, with
the verdicts a run would give: no vLLM."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from matrix.__main__ import main
from matrix.case.expansion import cells_from_file
from matrix.judge.result import CellResult
from matrix.report.files import RunInfo, json_report
from tests.helpers import WriteCase, replaced

INFO = RunInfo("0.34.0", ships="fixed")

PLAIN = """\
# Which variants stall (a comment kept).
name: plain
groups:
  - {kind: full, block_size: 4}
  - {kind: full, block_size: 4}
speculative: {method: eagle, num_tokens: 1}
pool: {start: 8, stop: 14}
requests:
  - {id: a, prompt: 16}   # one request
variants: [stock, none, original, fixed]
"""

AXES = """\
name: axes
groups:
  - {kind: full, block_size: 4}
  - {kind: full, block_size: 4}
speculative: {method: eagle, num_tokens: 1}
pool: {start: 8, stop: 14}
requests:
  - {id: a, prompt: 16}
variants: [none, fixed]
expect:
  none: stall   # every point
# k and the prompt
matrix:
  k:
    values:
      "1":
      "3": {speculative.num_tokens: 3}
  prompt: {path: requests.0.prompt, values: {short: 16, long: 24, longer: 32}}
when:
  - {k: "3", prompt: long, expect: {fixed: stall}}
"""


def verdict(cell_id: str, observed: str) -> tuple[str, str]:
    return cell_id, observed


def report(path: Path, cases: list[Path], observed: Mapping[str, str]) -> Path:
    """A JSON report of the cases' cells: each passes, or fails with the kind ``observed``
    names for it (``pass`` or a failure kind), its case digest the file's."""
    cells = []
    for case in cases:
        for cell in cells_from_file(case, "fixed"):
            seen = observed.get(cell.test_id, "pass")
            failed = seen != "pass"
            cells.append(
                CellResult(
                    cell.case.case_id,
                    None,
                    cell.variant,
                    "fail" if cell.expected != "pass" else "pass",
                    None,
                    "fail" if failed else "pass",
                    seen if failed else "finished",  # type: ignore[arg-type]
                    "",
                    f"{case.name}:1",
                    True,
                    case_digest=cell.case.digest,
                )
            )
    path.write_text(json.dumps(json_report(cells, INFO)), encoding="utf-8")
    return path


def expectations(path: Path) -> dict[str, str]:
    return {cell.test_id: cell.expected for cell in cells_from_file(path, "fixed")}


def test_a_case_without_expectations_gets_them_and_keeps_its_text(
    write_case: WriteCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = write_case(PLAIN)
    run = report(tmp_path / "r.json", [case], {"plain-none": "stall", "plain-original": "stall"})
    assert main(["record-expectations", str(run), str(case)]) == 0
    assert case.read_text() == PLAIN + "expect: {none: stall, original: stall}\n"
    out = capsys.readouterr().out
    assert "case.yaml: 2 expectations recorded (plain-none: stall, plain-original: stall)" in out
    assert "record-expectations: 2 expectations recorded; review them with git diff" in out
    assert main(["record-expectations", str(run), str(case)]) == 0  # met now: nothing to do
    assert "record-expectations: 0 expectations recorded" in capsys.readouterr().out


def test_stock_follows_what_its_release_ships_unless_it_differs(
    write_case: WriteCase, tmp_path: Path
) -> None:
    """Stock is held to fixed's expectation on a release shipping fixed: recording fixed's
    verdict records stock's; a stock verdict of its own is written as stock's."""
    case = write_case(PLAIN)
    same = {"plain-stock": "stall", "plain-fixed": "stall"}
    run = report(tmp_path / "a.json", [case], same)
    assert main(["record-expectations", str(run), str(case)]) == 0
    assert case.read_text().endswith("expect: {fixed: stall}\n")
    case = write_case(PLAIN)
    own = {"plain-stock": "not_admitted"}
    assert (
        main(["record-expectations", str(report(tmp_path / "b.json", [case], own)), str(case)]) == 0
    )
    assert case.read_text().endswith("expect: {stock: not_admitted}\n")


def test_block_expectations_are_set_in_place_and_points_get_when_entries(
    write_case: WriteCase, tmp_path: Path
) -> None:
    """A value wanted at every point goes in the block ``expect:`` (its comment kept); one
    wanted at a block of points is one ``when:`` entry naming it (a list of labels where the
    block spans several); an entry naming the same points is rewritten, not repeated."""
    case = write_case(AXES)
    observed = {
        # none now not_admitted everywhere
        **{
            f"axes[k={k},prompt={p}]-none": "not_admitted"
            for k in (1, 3)
            for p in ("short", "long", "longer")
        },
        # fixed stalls at k=1 for the two longer prompts; at k=3, long, it now passes
        "axes[k=1,prompt=long]-fixed": "stall",
        "axes[k=1,prompt=longer]-fixed": "stall",
    }
    run = report(tmp_path / "r.json", [case], {**observed})
    assert main(["record-expectations", str(run), str(case)]) == 0
    assert case.read_text() == replaced(
        AXES,
        ("  none: stall   # every point", "  none: not_admitted   # every point"),
        (
            '  - {k: "3", prompt: long, expect: {fixed: stall}}\n',
            '  - {k: "3", prompt: long, expect: {fixed: pass}}\n'
            '  - {k: "1", prompt: [long, longer], expect: {fixed: stall}}\n',
        ),
    )
    wanted = expectations(case)
    assert wanted["axes[k=3,prompt=long]-fixed"] == "pass"
    assert wanted["axes[k=1,prompt=short]-fixed"] == "pass"
    assert all(wanted[f"axes[k={k},prompt=short]-none"] == "not_admitted" for k in (1, 3))


def test_a_value_an_overlay_sets_is_recorded_where_the_top_level_cannot_reach(
    write_case: WriteCase, tmp_path: Path
) -> None:
    """An axis overlay sets fixed's expectation at k=3: the top-level ``expect:`` would not
    change it there, which the check of the edited file finds, so ``when:`` entries record it."""
    text = replaced(
        AXES,
        (
            '      "3": {speculative.num_tokens: 3}',
            '      "3": {speculative.num_tokens: 3, expect.fixed: stall}',
        ),
    )
    text = text[: text.index("when:")]
    case = write_case(text)
    observed = {
        f"axes[k={k},prompt={p}]-fixed": "leak" for k in (1, 3) for p in ("short", "long", "longer")
    }
    run = report(
        tmp_path / "r.json",
        [case],
        {
            **observed,
            **{
                f"axes[k={k},prompt={p}]-none": "stall"
                for k in (1, 3)
                for p in ("short", "long", "longer")
            },
        },
    )
    assert main(["record-expectations", str(run), str(case)]) == 0
    assert case.read_text() == text + 'when:\n  - {k: ["1", "3"], expect: {fixed: leak}}\n'
    assert set(expectations(case).values()) == {"leak", "stall"}


def test_what_cannot_be_recorded_is_said_and_nothing_is_written(
    write_case: WriteCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = write_case(PLAIN)
    run = report(tmp_path / "r.json", [case], {"plain-none": "stall"})
    case.write_text(PLAIN.replace("prompt: 16", "prompt: 17"))  # edited since the run
    assert main(["record-expectations", str(run), str(case)]) == 0
    out = capsys.readouterr().out
    assert "plain-none: its case changed since the run: run it again" in out
    assert "expect" not in case.read_text()
    other = write_case(PLAIN.replace("name: plain", "name: other"), "other.yaml")
    assert main(["record-expectations", str(run), str(other)]) == 0
    assert "4 cells of the report in none of the files given (the first: plain-fixed)" in (
        capsys.readouterr().out
    )
    multiline = write_case(PLAIN + "expect: {\n  none: fail}\n", "multi.yaml")
    run = report(tmp_path / "m.json", [multiline], {"plain-none": "stall", "plain-fixed": "leak"})
    assert main(["record-expectations", str(run), str(multiline)]) == 1
    assert "multi.yaml: not recorded: line 11: expect: a flow mapping over several lines" in (
        capsys.readouterr().out
    )
    (tmp_path / "bad.json").write_text("[]")
    assert main(["record-expectations", str(tmp_path / "bad.json"), str(case)]) == 2
    assert capsys.readouterr().err.startswith("matrix record-expectations: ")


def test_a_dry_run_prints_the_diff_and_writes_nothing(
    write_case: WriteCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = write_case(PLAIN)
    run = report(tmp_path / "r.json", [case], {"plain-none": "stall"})
    assert main(["record-expectations", str(run), str(case), "--dry-run"]) == 0
    assert case.read_text() == PLAIN
    out = capsys.readouterr().out
    assert f"+++ {case}\n" in out and "+expect: {none: stall}\n" in out
    assert not list(tmp_path.glob(".*"))  # no trial or partial file left behind


def test_a_file_naming_releases_is_recorded_only_on_its_reports_release(
    write_case: WriteCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``when: {release: ...}`` is held to the installed release: a report of another one
    would be judged against the wrong entries, so its file is refused, saying where to record."""
    from matrix.installed import installed_release
    from matrix.releases import RELEASES

    other = next(r for r in RELEASES if r != installed_release())
    case = write_case(PLAIN + f'when:\n  - {{release: "{other}", expect: {{none: pass}}}}\n')
    run = report(tmp_path / "r.json", [case], {"plain-none": "leak"})
    data = json.loads(run.read_text())
    run.write_text(json.dumps({**data, "vllm_version": f"{other}.0"}))
    before = case.read_text()
    assert main(["record-expectations", str(run), str(case)]) == 1
    assert f"its when: names releases, and the report is of {other}" in capsys.readouterr().out
    assert case.read_text() == before
