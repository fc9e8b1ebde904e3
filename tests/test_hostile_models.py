"""Hostile model files named by cases (the malformed files themselves are tests/corpus/models/,
checked by tests/test_hostile_input.py): a case naming a config.json nested a thousand deep, or
a model file that links to /dev/zero, is one line, and every other file is still checked and
still runs; what vLLM or transformers raises is one line with its key and reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from matrix.__main__ import main
from matrix.adapters.model_files import error_line
from matrix.case.model import ModelDescription
from tests.helpers import needs_vllm

GOOD = """\
name: good
groups:
  - {kind: full, block_size: 4}
pool: 12
variants: [fixed]
requests:
  - {id: a, prompt: 16}
"""
NAMING = """\
name: {name}
model: {model}
pool: {{below: 0, above: 0}}
variants: [fixed]
requests:
  - {{id: a, prompt: 16}}
"""
DEEP = '{"architectures": ["LlamaForCausalLM"], "x": ' + "[" * 1000 + "]" * 1000 + "}"


def hostile_folder(root: Path) -> Path:
    """Cases beside a config.json nested 1,000 deep (a RecursionError once, which stopped
    ``validate`` and interrupted the whole pytest session) and a model that is a link to
    /dev/zero (once "no model 'zero': did you mean 'zero'?"), and a good case."""
    cases = root / "cases"
    (cases / "models" / "deep").mkdir(parents=True)
    (cases / "models" / "deep" / "config.json").write_text(DEEP)
    (cases / "models" / "zero.yaml").symlink_to("/dev/zero")
    (cases / "deep.yaml").write_text(NAMING.format(name="deep", model="deep"))
    (cases / "zero.yaml").write_text(NAMING.format(name="zero", model="zero"))
    (cases / "good.yaml").write_text(GOOD)
    return cases


def test_validate_checks_every_file_past_the_unreadable_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = hostile_folder(tmp_path)
    assert main(["validate", str(cases)]) == 1
    deep = f"{cases}/models/deep/config.json:1: nested deeper than 32 levels"
    zero = f"{cases}/models/zero.yaml:1: cannot read: a character device, not a regular file"
    assert capsys.readouterr().out.splitlines() == [
        deep,  # the case naming it
        f"{cases}/good.yaml: ok, 1 cells",
        zero,  # the case naming it
        deep,  # the model files of models/, each checked as a file
        zero,
        "3 case files, 2 model files: 4 problems",
    ]


@needs_vllm
def test_a_pytest_session_runs_the_good_case_beside_them(inline: pytest.Pytester) -> None:
    hostile_folder(inline.path)
    inline.makefile(".ini", pytest="[pytest]\nmatrix_cases = cases\n")
    result = inline.runpytest_inprocess("-p", "no:cacheprovider", "-q", "--tb=line")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out and "Interrupted" not in out
    assert "config.json:1: nested deeper than 32 levels" in out
    assert "zero.yaml:1: cannot read: a character device, not a regular file" in out


def test_what_vllm_or_transformers_raises_is_one_line_with_its_reason() -> None:
    """Once ``2 validation errors for ModelDescription``, ``Validation error for field
    'num_hidden_layers':`` with nothing after it, a bare ``'X'``, ``integer division or modulo
    by zero``."""
    with pytest.raises(ValidationError) as refused:
        ModelDescription.model_validate(
            {"source": "s", "architecture": "A", "dtype": "half", "num_layers": 0}
        )
    assert error_line(refused.value) == (
        "dtype: Input should be 'bfloat16', 'float16' or 'float32'; num_layers: Input should be "
        "greater than 0; layer_pattern: Field required"
    )
    header = ValueError("Validation error for field 'n':\n    TypeError: expected int, got str")
    assert error_line(header) == "Validation error for field 'n': TypeError: expected int, got str"
    assert error_line(KeyError("X")) == "KeyError: 'X'"
    assert (
        error_line(ZeroDivisionError("division by zero")) == "ZeroDivisionError: division by zero"
    )
    assert error_line(RuntimeError()) == "RuntimeError"
