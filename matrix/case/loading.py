"""Reads case files into :class:`CaseFile`: a document's data (matrix/case/reading.py reads it
safely, with line numbers) validated by the schema, with the model description it names.

Every problem becomes a :class:`CaseFileError` whose text is one line, ``file:line: message``,
so a bad file is reported where it is wrong and never as a traceback.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from matrix.case.config_json import ConfigModel, config_model
from matrix.case.format import CaseFile
from matrix.case.model import ModelDescription
from matrix.case.model_paths import model_directory, model_file, no_model
from matrix.case.reading import CaseFileError as CaseFileError
from matrix.case.reading import LoadedDocument as LoadedDocument
from matrix.case.reading import Location as Location
from matrix.case.reading import read_yaml
from matrix.case.strict import problem_place
from matrix.variant_names import VARIANT_NAMES, variant_context


def read_document(
    path: Path, not_a_mapping: str = "a case file is a mapping (name:, groups:, ...)"
) -> LoadedDocument:
    """A file's data and lines; raises :class:`CaseFileError` with ``not_a_mapping`` unless it
    is a mapping."""
    data, lines = read_yaml(path)
    if not isinstance(data, dict):
        raise CaseFileError(path, lines[()], not_a_mapping)
    return LoadedDocument(path, data, lines)


def data_location(data: Any, pydantic_location: tuple[int | str, ...]) -> Location:
    """Drops the union-member names pydantic inserts, keeping the path that exists in ``data``."""
    kept: list[str | int] = []
    node = data
    for part in pydantic_location:
        in_mapping = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if not (in_mapping or in_list):
            continue
        node = node[part]
        kept.append(part)
    return tuple(kept)


def describe_validation_error(
    error: ValidationError,
    document: LoadedDocument,
    data: Any,
    axis_lines: dict[Location, int] | None = None,
    wording: Wording | None = None,
) -> CaseFileError:
    """One line for a validation error. ``axis_lines`` maps places of ``data`` that a matrix
    axis wrote to the line of that axis value, so errors there point at the axis, not the base;
    ``wording`` words it for another kind of file than a case (a model file)."""
    problems = []
    for problem in error.errors(include_url=False):
        location = data_location(data, problem_place(problem))
        if problem["type"] == "missing":  # name the key that is not there (at its parent's line)
            location = (*location, problem["loc"][-1])
        problems.append((location, problem))
    # Union members each report why they did not match: keep one problem per place, preferring
    # a failed rule (value_error) to a type mismatch.
    best: dict[Location, ErrorDetails] = {}
    for location, problem in problems:
        kept = best.get(location)
        if kept is None or (problem["type"] == "value_error" and kept["type"] != "value_error"):
            best[location] = problem
    # The deepest place first: it is the most specific.
    ordered = sorted(best.items(), key=lambda item: -len(item[0]))
    location = ordered[0][0]
    line = document.line_of(location)
    for prefix, axis_line in (axis_lines or {}).items():
        if location[: len(prefix)] == prefix:
            line = axis_line
    wording = wording or Wording()
    messages = [
        f"{'.'.join(str(p) for p in where) or wording.subject}: {wording.message(where, problem)}"
        for where, problem in ordered
    ]
    return CaseFileError(document.path, line, "; ".join(messages))


@dataclass(frozen=True)
class Wording:
    """How a validation problem reads for one kind of file: a case's by default; a model
    file's names its keys and says what a missing or unknown one is."""

    subject: str = "case"
    keys: tuple[str, ...] = ()  # the file's top-level keys, for a did-you-mean
    missing: dict[str, str] | None = None  # a required key -> what it holds

    def message(self, where: Location, problem: ErrorDetails) -> str:
        """The problem's message, without pydantic's prefix."""
        text = problem["msg"].removeprefix("Value error, ")
        if not self.keys or len(where) != 1:
            return text
        if problem["type"] == "missing":
            return f"missing: {(self.missing or {}).get(str(where[0]), 'required')}"
        if problem["type"] == "extra_forbidden":
            guess = difflib.get_close_matches(str(where[0]), self.keys, n=1)
            hint = f"did you mean '{guess[0]}'?" if guess else f"keys: {', '.join(self.keys)}"
            return f"not a key of a {self.subject}: {hint}"
        return text


def validate(
    document: LoadedDocument,
    data: Any | None = None,
    axis_lines: dict[Location, int] | None = None,
    variants: tuple[str, ...] = VARIANT_NAMES,
) -> CaseFile:
    """Validates ``data`` (the document's own, or an expanded copy of it) as a case whose
    ``expect`` and ``variants`` may name any of ``variants``."""
    payload = document.data if data is None else data
    payload = _with_description(document, payload, axis_lines or {})
    try:
        return CaseFile.model_validate(payload, context=variant_context(variants))
    except ValidationError as error:
        raise describe_validation_error(error, document, payload, axis_lines) from None


def claim_name(claimed: dict[str, tuple[Path, str]], name: str, path: Path, line: int) -> None:
    """Records that ``path`` names a case ``name``. Names are the ids of reports and tables, so
    a second file with the same name is an error at its name's line."""
    first = claimed.setdefault(name, (path.resolve(), f"{path}:{line}"))
    if first[0] != path.resolve():
        raise CaseFileError(path, line, f"case name '{name}' is already used by {first[1]}")


def load_case_file(path: Path) -> tuple[LoadedDocument, CaseFile]:
    """A case file read and validated, with its document."""
    document = read_document(path)
    return document, validate(document)


_descriptions: dict[tuple[Path, float], ModelDescription] = {}
MODEL_FILE = Wording(
    "model file",
    tuple(ModelDescription.model_fields),
    {
        "source": "where the numbers come from (the config.json's URL)",
        "architecture": "config.json's architectures[0], as vLLM's registry knows it",
        "dtype": "config.json's torch_dtype",
        "num_layers": "config.json's num_hidden_layers",
        "layer_pattern": "the kinds of consecutive layers, repeated to num_layers",
    },
)


def _file_key(path: Path) -> tuple[Path, float]:
    """A model file's cache key: where it is and when it changed (a file that cannot even be
    looked at gets a key of its own, and its reading says why)."""
    try:
        return path.resolve(), path.stat().st_mtime
    except (OSError, RuntimeError):  # RuntimeError: a loop of links
        return path, -1.0


def read_description(path: Path) -> ModelDescription:
    """A model description file, validated; raises :class:`CaseFileError` at its line."""
    key = _file_key(path)
    if key not in _descriptions:
        document = read_document(path, "a model file is a mapping (source:, architecture:, ...)")
        try:
            _descriptions[key] = ModelDescription.model_validate(document.data)
        except ValidationError as error:
            raise describe_validation_error(
                error, document, document.data, wording=MODEL_FILE
            ) from None
    return _descriptions[key]


_config_models: dict[tuple[Path, float], ConfigModel] = {}


def read_model_file(path: Path) -> ModelDescription | ConfigModel:
    """A model file: a config.json (checked as a file; vLLM reads it at run time) or a model
    description; raises :class:`CaseFileError` at its line."""
    if path.suffix != ".json":
        return read_description(path)
    key = _file_key(path)
    if key not in _config_models:
        _config_models[key] = config_model(path)
    return _config_models[key]


def with_model(payload: Any, case_dir: Path | None, line: int = 1, case: Path | None = None) -> Any:
    """A case's data with ``described`` filled in from the model file ``model`` names (case
    data written by a program, ``case_dir`` None, names shipped models or paths)."""
    model = payload.get("model") if isinstance(payload, dict) else None
    path = model_file(model, case_dir) if isinstance(model, str) else None
    if path is None:
        if isinstance(model, str) and case is not None and model_directory(model) is None:
            raise CaseFileError(case, line, f"model: {no_model(model, case_dir)}")
        return payload
    if not path.is_symlink() and not path.exists():  # else the reader says what it is
        where = case or path
        raise CaseFileError(where, line, f"model: no file {model} ({path.resolve()})")
    return {**payload, "described": read_model_file(path)}


def _with_description(
    document: LoadedDocument, payload: Any, axis_lines: dict[Location, int]
) -> Any:
    """The case's data with ``described`` filled in from the model file ``model`` names."""
    if not isinstance(payload, dict):
        return payload
    if "described" in payload:
        line = axis_lines.get(("described",), document.line_of(("described",)))
        raise CaseFileError(document.path, line, "'described' is read from the model file")
    line = axis_lines.get(("model",), document.line_of(("model",)))
    return with_model(payload, document.path.parent, line, document.path)
