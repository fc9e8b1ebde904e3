"""Bad case files give one line naming the file and the line, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from matrix.case.expansion import cells_from_file
from matrix.case.loading import CaseFileError
from tests.helpers import CASES, WriteCase, replaced

GOOD = """\
name: demo
groups:
  - {kind: full, block_size: 4}
speculative: {method: ngram, num_tokens: 2}
pool: 12
requests:
  - {id: a, prompt: 16}
"""


def problem(path: Path) -> CaseFileError:
    with pytest.raises(CaseFileError) as caught:
        cells_from_file(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:{caught.value.line}: ")
    return caught.value


def test_good_file_loads(write_case: WriteCase) -> None:
    cells = cells_from_file(write_case(GOOD))
    assert [c.test_id for c in cells] == [
        "demo-stock",
        "demo-none",
        "demo-original",
        "demo-group_count",
        "demo-all_groups",
        "demo-fixed",
        "demo-proposed",
    ]


def test_unknown_key_names_its_line(write_case: WriteCase) -> None:
    error = problem(write_case(GOOD + "colour: blue\n"))
    assert error.line == 8
    assert "colour" in error.message and "Extra inputs" in error.message


def test_nested_error_points_at_the_item(write_case: WriteCase) -> None:
    text = replaced(
        GOOD,
        (
            "  - {kind: full, block_size: 4}",
            "  - {kind: full, block_size: 4}\n  - {kind: sliding_window, block_size: 4}",
        ),
    )
    error = problem(write_case(text))
    assert error.line == 4
    assert "groups.1" in error.message and "window" in error.message


def test_wrong_type_in_request(write_case: WriteCase) -> None:
    error = problem(write_case(replaced(GOOD, ("prompt: 16", "prompt: lots"))))
    assert error.line == 7
    assert "requests.0.prompt" in error.message


def test_invalid_yaml(write_case: WriteCase) -> None:
    error = problem(write_case(replaced(GOOD, ("pool: 12", "pool: [12"))))
    assert error.line >= 5
    assert "invalid YAML" in error.message


def test_duplicate_key(write_case: WriteCase) -> None:
    error = problem(write_case(GOOD + "pool: 14\n"))
    assert error.line == 8
    assert "duplicate key 'pool'" in error.message


def test_unknown_request_in_events(write_case: WriteCase) -> None:
    error = problem(write_case(GOOD + "events:\n  - step: 1\n  - complete_load: [b]\n"))
    assert error.line == 10
    assert error.message == "events.1: unknown requests: b"


def test_axis_path_that_does_not_exist(write_case: WriteCase) -> None:
    text = GOOD + "matrix:\n  k: {path: speculative.tokens_per_step.x, values: [1, 2]}\n"
    # A new key is allowed by the path, then rejected by the schema for the expanded case.
    error = problem(write_case(text))
    assert error.message.startswith("[k=1]")


def test_axis_value_error_names_the_point(write_case: WriteCase) -> None:
    text = GOOD + "matrix:\n  k: {path: speculative.num_tokens, values: [1, 99]}\n"
    error = problem(write_case(text))
    assert error.line == 9
    assert error.message.startswith("[k=99] speculative.num_tokens")


def test_sweep_bounds_checked(write_case: WriteCase) -> None:
    error = problem(write_case(replaced(GOOD, ("pool: 12", "pool: {start: 20, stop: 10}"))))
    assert error.line == 5
    assert error.message == "pool: stop (10) is below start (20)"  # not the int alternative


def test_empty_file(write_case: WriteCase) -> None:
    assert problem(write_case("")).line == 1


def test_shipped_cases_all_load() -> None:
    for path in sorted(CASES.glob("*.yaml")):
        assert cells_from_file(path)


def test_run_must_be_the_last_event(write_case: WriteCase) -> None:
    error = problem(write_case(GOOD + "events:\n  - run: {}\n  - step: 1\n"))
    assert error.line == 9
    assert error.message == "events.0: 'run' ends a scenario: it must come last"


def test_numbers_are_not_coerced(write_case: WriteCase) -> None:
    error = problem(write_case(replaced(GOOD, ("prompt: 16", 'prompt: "16"'))))
    assert error.line == 7 and "valid integer" in error.message
    assert (
        "valid integer"
        in problem(write_case(replaced(GOOD, ("prompt: 16", "prompt: true")))).message
    )


def test_event_errors_name_the_event_kind(write_case: WriteCase) -> None:
    error = problem(write_case(GOOD + "events:\n  - {complete_load: a}\n"))
    assert "events.0.complete_load: Input should be a valid list" in error.message
    error = problem(write_case(GOOD + "events:\n  - {stepp: 1}\n"))
    assert "an event is one of step:, complete_load:, abort:, fail_load: or run:" in error.message


def test_misspelt_variant_in_expect(write_case: WriteCase) -> None:
    error = problem(write_case(GOOD + "expect: {orignal: fail}\n"))
    assert error.line == 8 and "'original'" in error.message


def test_axis_value_error_points_at_the_axis_value(write_case: WriteCase) -> None:
    text = (
        GOOD
        + "matrix:\n  k:\n    path: speculative.num_tokens\n    values:\n      - 1\n      - 99\n"
    )
    error = problem(write_case(text))
    assert error.line == 13
    assert error.message.startswith("[k=99] speculative.num_tokens")


def test_yaml_anchors_and_merge_keys(write_case: WriteCase) -> None:
    text = replaced(
        GOOD,
        (
            "groups:\n  - {kind: full, block_size: 4}",
            "base: &full {kind: full}\ngroups:\n  - {<<: *full, block_size: 4}",
        ),
    )
    error = problem(write_case(text))  # the anchor's own key is still an unknown key
    assert error.line == 2 and "base" in error.message
    merged = replaced(
        text,
        ("base: &full {kind: full}\n", ""),
        ("  - {<<: *full, block_size: 4}", "  - &g {kind: full, block_size: 4}\n  - {<<: *g}"),
    )
    assert len(cells_from_file(write_case(merged, "merged.yaml"))) == 7


def test_mixed_mamba_modes_rejected(write_case: WriteCase) -> None:
    text = replaced(
        GOOD,
        (
            "  - {kind: full, block_size: 4}",
            "  - {kind: mamba, block_size: 4, mamba_mode: align}\n"
            "  - {kind: mamba, block_size: 4, mamba_mode: none}",
        ),
    )
    error = problem(write_case(text))
    assert error.line == 4
    assert error.message == "groups.1.mamba_mode: all mamba groups of a model share one mamba_mode"


def test_cross_field_rules_name_the_item(write_case: WriteCase) -> None:
    two = GOOD + "  - {id: a, prompt: 8}\n"
    error = problem(write_case(two))
    assert (error.line, error.message) == (8, "requests.1.id: request id 'a' repeats")
    error = problem(write_case(replaced(GOOD, ("prompt: 16", "prompt: 1022"))))
    assert error.line == 7
    assert error.message == "requests.0: prompt + max_tokens (1026) exceeds max_model_len (1024)"


def test_model_must_exist(write_case: WriteCase) -> None:
    error = problem(write_case(GOOD + "model: llama-huge\n"))
    assert error.line == 8
    assert error.message.startswith("model: no model 'llama-huge': did you mean 'llama-4-scout'?")
    assert "deepseek-v3" not in error.message  # a did-you-mean, not the list of every model


def test_every_problem_in_one_line(write_case: WriteCase) -> None:
    text = replaced(GOOD, ("prompt: 16", "prompt: 0"), ("pool: 12", "pool: 1"))
    error = problem(write_case(text))
    assert error.line == 7  # the deepest problem first
    assert error.message == (
        "requests.0.prompt: Input should be greater than 0; pool: Input should be greater "
        "than or equal to 2"
    )
