"""``python -m matrix validate [paths]``: case files and model files checked without running
them, a line per problem (``file:line: message``) and per warning, and a last line saying what
was checked (``3 case files, 2 model files: ok``).

Case files are read and expanded as a run would (``matrix.case``). The model files they use,
those named, and those in a ``models/`` folder of a directory named (whether or not a case
uses them) are checked as files, then against transformers and the installed vLLM
(``matrix.adapters.model_checks``): without importing vLLM where a file's rules allow it (a
description's architecture against ``matrix.architectures``' records), importing it, with a
line saying so and how long it took, where they do not (a config.json, which vLLM reads; a
Mamba state; a model case's derived layout). What vLLM answered is kept per release
(``matrix.tools.check_cache``), so an unchanged file checked again does not import it.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from matrix.case.expansion import CASE_SUFFIXES, Case, case_files, cells_from_file
from matrix.case.loading import CaseFileError, claim_name, read_document, read_model_file
from matrix.case.model import FitSweep, ModelDescription
from matrix.case.model_paths import MODELS_FOLDER, is_model_file, model_file, model_files
from matrix.releases import NEWEST_SHIPPED
from matrix.run.user_variants import VariantLoadError, run_variants
from matrix.wording import plural

if TYPE_CHECKING:
    from matrix.adapters.model_checks import CaseLayout


@dataclass
class Checked:
    """What a validation has seen: the files, the model cases, the problems."""

    cases: list[Path] = field(default_factory=list)
    models: dict[Path, None] = field(default_factory=dict)  # in the order seen, once each
    model_cases: list[Case] = field(default_factory=list)
    problems: int = 0
    bad_models: set[Path] = field(default_factory=set)

    def error(self, line: object) -> None:
        """Prints a problem."""
        print(line)
        self.problems += 1

    def summary(self) -> str:
        """``3 case files, 2 model files: ok`` (or the number of problems)."""
        counts = f"{plural(len(self.cases), 'case file')}, {plural(len(self.models), 'model file')}"
        problems = plural(self.problems, "problem")
        return f"{counts}: {problems if self.problems else 'ok'}"


def _named_files(paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """The case files and the model files ``paths`` name."""
    cases: list[Path] = []
    models: list[Path] = []
    for path in paths:
        if path.suffix in CASE_SUFFIXES and not is_model_file(path):
            cases.append(path)  # a directory named like a case file is a mistake to report
        elif path.is_dir() and path.name == MODELS_FOLDER:
            models += model_files(path)
        elif path.is_dir():
            cases += case_files(path)
            models += model_files(path / MODELS_FOLDER)
        elif is_model_file(path):
            models.append(path)
        else:
            cases.append(path)
    return list(dict.fromkeys(cases)), list(dict.fromkeys(models))


def validate_files(paths: list[Path], references: list[str]) -> int:
    """Checks every file ``paths`` name, with the run's variants (``references``: a user's
    ``MODULE:NAME``); prints a line per problem and a summary; returns the exit code."""
    try:
        variants = tuple(run_variants(references))
    except VariantLoadError as error:
        print(f"--variant: {error}")
        return 2
    case_paths, model_paths = _named_files(paths)
    checked = Checked()
    for path in model_paths:
        checked.models[path] = None
    claimed: dict[str, tuple[Path, str]] = {}
    for path in case_paths:
        checked.cases.append(path)
        try:
            cells = cells_from_file(path, NEWEST_SHIPPED, variants)
            if cells:
                claim_name(claimed, cells[0].case.definition.name, path, cells[0].case.line)
        except CaseFileError as error:
            checked.error(error)
            continue
        print(f"{path}: ok, {len(cells)} cells")
        for case in {cell.case.case_id: cell.case for cell in cells}.values():
            for warning in _case_warnings(case):
                print(warning)
            used = model_file(case.definition.model, path.parent)
            if case.definition.described is not None and used is not None:
                checked.models.setdefault(used, None)
                checked.model_cases.append(case)
    _check_models(checked, [path for path in model_paths if path in paths])
    print(checked.summary())
    return 1 if checked.problems else 0


def _check_models(checked: Checked, named: list[Path]) -> None:
    """The model files as files, then against transformers and vLLM; the model cases' layouts.
    Where vLLM is imported for them, the ``named`` files' ``show-layout`` (its default
    options) is derived and kept too: asked next, it needs no import of its own."""
    for path in list(checked.models):
        try:
            read_model_file(path)
        except CaseFileError as error:
            checked.error(error)
            checked.bad_models.add(path)
    readable = [path for path in checked.models if path not in checked.bad_models]
    if importlib.util.find_spec("vllm") is None:
        if readable:
            print("note: vLLM is not installed: model files checked as files only")
        for path in readable:
            print(f"{path}: ok, {_kind(path)}")
        return
    from matrix.adapters.model_checks import needs_vllm
    from matrix.tools.check_cache import checked_model_file, known_model_check

    known = {path: known_model_check(path) for path in readable}
    cases = _cases_needing_vllm(checked)
    layouts = _known_layouts(cases)
    heavy = [p for p in readable if known[p] is None and needs_vllm(p)]
    unknown = [case for case, layout in zip(cases, layouts, strict=True) if layout is None]
    if heavy or unknown:
        _import_vllm(heavy, unknown)
    for path in readable:
        found = known[path] or checked_model_file(path)
        for problem in found.errors:
            checked.error(problem)
        for warning in found.warnings:
            print(warning)
        if found.errors:
            checked.bad_models.add(path)
        else:
            print(f"{path}: ok, {_kind(path)}")
            if heavy or unknown:
                _keep_shown_layout(path, named)
    _check_model_cases(checked, cases, layouts)


def _keep_shown_layout(path: Path, named: list[Path]) -> None:
    """``show-layout``'s report of a model file named on the command line, kept."""
    if path in named:
        from matrix.tools.show_layout import keep_default_report

        keep_default_report(path)


def _import_vllm(files: list[Path], cases: list[Case]) -> None:
    """Imports vLLM for what the cache of earlier checks does not answer, saying so."""
    from matrix.tools.check_cache import import_vllm_saying

    purpose = (
        f"to read {plural(len(files), 'model file')} and derive "
        f"{plural(len(cases), 'model case layout')}"
    )
    import_vllm_saying("validate", purpose)


def _known_layouts(cases: list[Case]) -> list[CaseLayout | None]:
    """Each model case's layout as an earlier check stored it, or None."""
    from matrix.tools.check_cache import known_case_layout

    return [known_case_layout(case.definition, _model_path(case)) for case in cases]


def _model_path(case: Case) -> Path:
    path = model_file(case.definition.model, case.source.parent)
    assert path is not None  # a model case's file, found when it was read
    return path


def _kind(path: Path) -> str:
    return "a model's config.json" if path.suffix == ".json" else "a model description"


def _cases_needing_vllm(checked: Checked) -> list[Case]:
    """The model cases whose layout is derived here: all whose model file is fine (their
    layout errors and fit_slack warnings need it); a description's device problem is pure."""
    from matrix.adapters.devices import device_problem

    cases = []
    for case in checked.model_cases:
        spec = case.definition
        described = spec.described
        path = model_file(spec.model, case.source.parent)
        if path in checked.bad_models:
            continue
        if isinstance(described, ModelDescription):
            problem = device_problem(described, spec.layout)
            if problem is not None:
                line = read_document(case.source).line_of(("layout", "device"))
                checked.error(f"{case.source}:{line}: [{case.case_id}] layout.device: {problem}")
                continue
            if spec.speculative is None:
                continue  # nothing to warn of: the layout is derived by the run
        cases.append(case)
    return cases


def _check_model_cases(
    checked: Checked, cases: list[Case], layouts: list[CaseLayout | None]
) -> None:
    from matrix.adapters.model_checks import case_layout_problem
    from matrix.tools.check_cache import derived_case_layout

    warnings: dict[str, None] = {}
    for case, known in zip(cases, layouts, strict=True):
        layout = known or derived_case_layout(case.definition, _model_path(case))
        problem, warning = case_layout_problem(case, layout)
        if problem is not None:
            checked.error(problem)
        if warning is not None:
            warnings[warning] = None
    for warning in warnings:
        print(warning)


def _case_warnings(case: Case) -> list[str]:
    """What a case says that holds, but not as its writer likely meant."""
    warnings = []
    where = f"{case.source}"
    stock = case.redundant_stock()
    if stock:
        warnings.append(
            f"{where}:{case.expectation_line('stock')}: warning: [{case.case_id}] {stock}"
        )
    spec = case.definition
    if isinstance(spec.pool, FitSweep) and spec.pool.above < spec.fit_slack:
        warnings.append(
            f"{where}:{case.line}: warning: [{case.case_id}] pool.above {spec.pool.above} stops "
            f"inside fit_slack {spec.fit_slack}: every pool swept above the fit may be refused, "
            f"so none has to finish and tightness reads unfinished; use above: {spec.fit_slack}"
            " or more"
        )
    return warnings
