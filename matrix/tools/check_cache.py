"""What ``validate`` and ``show-layout`` learnt from vLLM about a model file, kept per release
(``matrix.tools.check_store``), so that checking an unchanged file again answers without
importing vLLM (seconds): a model file's check, a model case's derived layout, and
``show-layout``'s report for its options (the case they make). An answer that turned on whether
a model's module imports here is not kept: another install of the release can change it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from matrix.adapters.model_checks import CaseLayout, ModelFileCheck
from matrix.case.format import CaseFile
from matrix.case.reading import CaseFileError
from matrix.installed import installed_vllm_version
from matrix.tools.check_store import Question, installed_fingerprint, question


@dataclass(frozen=True)
class CheckAnswer:
    """A model file's check as stored: each problem's line and message (a check with warnings
    is not stored)."""

    errors: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class ShownGroup:
    """One group of ``show-layout``'s report."""

    kind: str
    block_size: int
    layers: int
    window: int | None
    mamba_mode: str | None
    prefill_checkpoint_blocks: int


@dataclass(frozen=True)
class ShownLayout:
    """``show-layout``'s report (its ``--json``), its keys in their order there."""

    model: str
    vllm_version: str | None
    device: str
    groups: tuple[ShownGroup, ...]
    scheduler_block_size: int
    hash_block_size: int


CHECKS = TypeAdapter(CheckAnswer)
LAYOUTS = TypeAdapter(CaseLayout)
REPORTS = TypeAdapter(ShownLayout)


def _check_question(path: Path) -> Question | None:
    return question("model-file", path, None)


def known_model_check(path: Path) -> ModelFileCheck | None:
    """A model file's check as an earlier one stored it, or None."""
    asked = _check_question(path)
    stored = asked.answer(CHECKS) if asked is not None else None
    if stored is None:
        return None
    return ModelFileCheck([CaseFileError(path, line, message) for line, message in stored.errors])


def checked_model_file(path: Path) -> ModelFileCheck:
    """A model file's check (``model_checks.check_model_file``: vLLM where it needs it), stored
    unless it has a warning (those say a model module does not import here)."""
    known = known_model_check(path)
    if known is not None:
        return known
    from matrix.adapters.model_checks import check_model_file

    found = check_model_file(path)
    asked = _check_question(path)
    if asked is not None and not found.warnings:
        answer = CheckAnswer(tuple((error.line, error.message) for error in found.errors))
        asked.keep(CHECKS.dump_python(answer, mode="json"))
    return found


def _layout_question(spec: CaseFile, model: Path) -> Question | None:
    return question("case-layout", model, spec.model_dump(mode="json"))


def known_case_layout(spec: CaseFile, model: Path) -> CaseLayout | None:
    """A model case's derived layout as an earlier check stored it, or None."""
    asked = _layout_question(spec, model)
    return asked.answer(LAYOUTS) if asked is not None else None


def derived_case_layout(spec: CaseFile, model: Path) -> CaseLayout:
    """A model case's layout as vLLM derives it (``model_checks.derive_case_layout``), stored
    unless it turned on a module that does not import here."""
    known = known_case_layout(spec, model)
    if known is not None:
        return known
    from matrix.adapters.model_checks import derive_case_layout

    derived = derive_case_layout(spec)
    asked = _layout_question(spec, model)
    if asked is not None and not derived.depends_on_install:
        asked.keep(LAYOUTS.dump_python(derived, mode="json"))
    return derived


def _report_question(case: CaseFile, model: Path) -> Question | None:
    return question("show-layout", model, case.model_dump(mode="json"))


def known_report(case: CaseFile, model: Path) -> dict[str, Any] | None:
    """``show-layout``'s report for this case (its options and model) as stored, or None."""
    asked = _report_question(case, model)
    stored = asked.answer(REPORTS) if asked is not None else None
    if stored is None:
        return None
    report = asdict(stored)
    return {**report, "groups": list(report["groups"])}  # as show-layout made it


def keep_report(case: CaseFile, model: Path, report: dict[str, Any]) -> None:
    """Stores ``show-layout``'s report for this case."""
    asked = _report_question(case, model)
    try:
        shown = REPORTS.validate_json(json.dumps(report), strict=True)
    except ValueError:  # not the shape read back: nothing kept that would not be
        return
    if asked is not None:
        asked.keep(REPORTS.dump_python(shown, mode="json"))


def import_vllm_saying(command: str, purpose: str) -> None:
    """Imports vLLM (once per process), saying so on stderr, then how long it took."""
    from matrix.runner.forked import import_vllm_once

    kept = "answers kept for the next call" if installed_fingerprint() else "a checkout: not kept"
    # One line, its end written once the import is done (vLLM writes nothing meanwhile).
    print(
        f"{command}: importing vLLM {installed_vllm_version()} {purpose} ({kept}) ...",
        end="",
        file=sys.stderr,
        flush=True,
    )
    print(f" imported in {import_vllm_once():.1f} s", file=sys.stderr, flush=True)
