"""A JSON report read back (a release env's, a CI shard's, a forked worker's): read as every input
is (``matrix.case.reading``: a regular file, bounded in size and nesting), then every field
checked as what it claims to be before anything is built from it, each problem one line naming
the file and the key.

Reports are CI artifacts, possibly from untrusted pull requests, and their names become file
names (``vllm-<version>.md``, the pictures'): the release must be a vLLM version as reports
write it, the variant its stock is a built-in's name, each cell's values of their types, its
case an id of the shape expansion gives, its variant a variant's name, its steps a run's, and
no text may hold control characters (they would break a line, or drive the terminal).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from matrix.case.connector import CONNECTOR_NAMES
from matrix.case.expansion import CASE_ID
from matrix.case.json_input import read_json
from matrix.case.limits import MAX_REPORT_BYTES
from matrix.case.reading import CaseFileError
from matrix.case.shipped import SUITES
from matrix.installed import Source
from matrix.judge.cost import PoolCost
from matrix.judge.result import CellResult
from matrix.releases import label_problem
from matrix.report.info import RunInfo
from matrix.run.records import PoolSteps
from matrix.variant_names import VARIANT_ID, VARIANT_NAMES

CELL_FIELDS = frozenset(field.name for field in fields(CellResult))
_CELL = TypeAdapter(CellResult)
_SOURCE = TypeAdapter(Source)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class ReportError(Exception):
    """A report file that cannot be used; the message is one line naming it (and the key)."""


class NotAReport(ReportError):
    """A readable JSON file that is no matrix report at all (no ``cells``, no release)."""


@dataclass(frozen=True)
class ReportData:
    """A report's JSON object, and what it says of the run and its cells, checked."""

    path: Path
    data: dict[str, Any]
    info: RunInfo
    cells: tuple[CellResult, ...]


def read_report(path: Path) -> ReportData:
    """The report at ``path``; :class:`ReportError` (one line) where it is not one."""
    try:
        data = read_json(path, MAX_REPORT_BYTES, "a report")
    except CaseFileError as error:
        raise ReportError(str(error)) from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise NotAReport(f"{path}: not a matrix JSON report (no cells)")
    if "vllm_version" not in data:
        raise NotAReport(f"{path}: not a matrix JSON report (no vllm_version)")
    info = _run_info(path, data)
    cells = tuple(_cell(path, f"cells.{i}", cell) for i, cell in enumerate(data["cells"]))
    return ReportData(path, data, info, cells)


def _text_problem(value: Any) -> str | None:
    """Why a value that must be text is not one-line text, or None."""
    if not isinstance(value, str):
        return f"text, not {type(value).__name__}"
    if _CONTROL.search(value):
        return f"{value[:60]!r} holds control characters"
    return None


def _run_info(path: Path, data: dict[str, Any]) -> RunInfo:
    version, ships = data["vllm_version"], data.get("ships")
    release = None if version is None else _text_problem(version) or label_problem(version)
    suite = data.get("suite", "")
    problems = {
        "vllm_version": release,
        "ships": None if ships is None or ships in VARIANT_NAMES else f"{ships!r}: not a variant",
        "matrix_digest": _text_problem(data.get("matrix_digest", "")),
        "suite": None if suite in SUITES else f"{suite!r:.40}: not a suite",
        "selection": _text_problem(data.get("selection", "")),
    }
    for key, problem in problems.items():
        if problem is not None:
            raise ReportError(f"{path}: {key}: {problem}")
    source = data.get("source")
    if source is not None:
        try:
            source = _SOURCE.validate_json(json.dumps(source), strict=True)
        except ValidationError as error:
            raise ReportError(f"{path}: {_first(error, 'source')}") from None
        problem = _text_problem(source.path) or _text_problem(source.commit or "")
        if problem is not None:
            raise ReportError(f"{path}: source: {problem}")
    digest, selection = data.get("matrix_digest", ""), data.get("selection", "")
    return RunInfo(version, ships, digest, source, suite, selection)


def _first(error: ValidationError, where: str) -> str:
    """A validation error's first problem, ``key: message``, its key under ``where``."""
    first = error.errors(include_url=False)[0]
    return f"{'.'.join(map(str, (where, *first['loc'])))}: {first['msg']}"


def _cell(path: Path, where: str, data: Any) -> CellResult:
    """One cell record, checked field by field; :class:`ReportError` at the first problem."""
    if not isinstance(data, dict):
        raise ReportError(f"{path}: {where}: not a cell (an object of its fields)")
    unknown = sorted(map(str, data.keys() - CELL_FIELDS))
    if unknown:
        raise ReportError(f"{path}: {where}.{unknown[0][:40]}: not a field of a cell")
    steps = data.get("steps", [])
    if not isinstance(steps, list):
        raise ReportError(f"{path}: {where}.steps: a list of runs' steps")
    records = [_steps(path, f"{where}.steps.{i}", run) for i, run in enumerate(steps)]
    try:
        cell = _CELL.validate_json(json.dumps({**data, "steps": records}), strict=True)
    except ValidationError as error:
        raise ReportError(f"{path}: {_first(error, where)}") from None
    problem = _name_problem(cell)
    if problem is not None:
        raise ReportError(f"{path}: {where}.{problem}")
    return cell


def _name_problem(cell: CellResult) -> str | None:
    """``key: why`` for the first name or text of ``cell`` that is not what it claims to be."""
    if CASE_ID.fullmatch(cell.case) is None:
        return f"case: {cell.case[:60]!r} is not a case id (name[axis=label,...])"
    if re.fullmatch(VARIANT_ID, cell.variant) is None:
        return f"variant: {cell.variant[:60]!r} is not a variant's name"
    if cell.connector is not None and cell.connector not in CONNECTOR_NAMES:
        return f"connector: {cell.connector[:60]!r} is not a connector's name"
    for index, text in enumerate(cell.costs):
        try:
            PoolCost.from_text(text)
        except ValueError:
            return f"costs.{index}: {text[:60]!r} is not a pool's cost (pool steps preemptions ...)"
    texts = {name: getattr(cell, name) for name in ("column", "detail", "source", "model")}
    texts |= {"case_digest": cell.case_digest, "startable_reason": cell.startable_reason}
    for name, value in texts.items():
        problem = None if value is None else _text_problem(value)
        if problem is not None:
            return f"{name}: {problem}"
    return None


def _steps(path: Path, where: str, data: Any) -> dict[str, Any]:
    """One run's steps as :class:`PoolSteps` fields (for the cell's validation), refused where
    they are not a run's: unreadable, or blocks that are not one per group and request."""
    try:
        run = PoolSteps.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ReportError(f"{path}: {where}: not a run's steps ({type(error).__name__})") from None
    shape = (len(run.groups), len(run.requests))
    for step, held in enumerate(run.held):
        if len(held) != shape[0] or any(len(group) != shape[1] for group in held):
            raise ReportError(
                f"{path}: {where}.steps.{step}: not a block count per group ({shape[0]}) and "
                f"request ({shape[1]})"
            )
    texts = [*run.groups, *run.requests, *(mark.what for mark in run.marks)]
    texts += [mark.request for mark in run.marks]
    problem = next((p for p in map(_text_problem, texts) if p is not None), None)
    if problem is not None:
        raise ReportError(f"{path}: {where}: {problem}")
    # PoolSteps' fields as JSON data (dataclasses.asdict copies every number, a third of a
    # report's reading).
    record = {field.name: getattr(run, field.name) for field in fields(run)}
    return {**record, "marks": [vars(mark) for mark in run.marks]}
