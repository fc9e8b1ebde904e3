"""``python -m matrix validate [paths]``: case files and model files checked without running
them, a line per problem (``file:line: message``) and per warning.

Case files are read and expanded as a run would (``matrix.case``); the model files they use,
and those named, are also checked against the installed vLLM and transformers
(``matrix.adapters.model_files``) when vLLM is installed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from matrix.case.expansion import CASE_SUFFIXES, Case, case_files, cells_from_file
from matrix.case.loading import CaseFileError, claim_name, read_description
from matrix.case.model import FitSweep, description_path, is_model_file
from matrix.releases import NEWEST_SHIPPED
from matrix.run.user_variants import VariantLoadError, run_variants


def validate_files(paths: list[Path], references: list[str]) -> int:
    """Checks every file ``paths`` name, with the run's variants (``references``: a user's
    ``MODULE:NAME``); prints a line per file or problem; returns the exit code."""
    try:
        variants = tuple(run_variants(references))
    except VariantLoadError as error:
        print(f"--variant: {error}")
        return 2
    # A directory named like a case file is a mistake to report, not a folder to search.
    named = [[p] if p.suffix in CASE_SUFFIXES else case_files(p) for p in paths]
    files = list(dict.fromkeys(f for group in named for f in group))
    problems = 0
    claimed: dict[str, tuple[Path, str]] = {}
    models: dict[Path, None] = {}  # the model files named or used, checked once each
    described: list[Case] = []  # cases of a described model, for the layout's warnings
    for path in files:
        try:
            if is_model_file(path):
                read_description(path)
                models[path] = None
                continue
            cells = cells_from_file(path, NEWEST_SHIPPED, variants)
            if cells:
                claim_name(claimed, cells[0].case.definition.name, path, cells[0].case.line)
        except CaseFileError as error:
            print(error)
            problems += 1
            continue
        print(f"{path}: ok, {len(cells)} cells")
        for case in {cell.case.case_id: cell.case for cell in cells}.values():
            for warning in _case_warnings(case):
                print(warning)
            used = description_path(case.definition.model, path.parent)
            if case.definition.described is not None and used is not None:
                models[used] = None
                described.append(case)
    if not _vllm_installed(list(models)):
        return 1 if problems else 0
    problems += _check_model_files(list(models))
    for warning in dict.fromkeys(w for case in described for w in _layout_warnings(case)):
        print(warning)
    return 1 if problems else 0


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


def _vllm_installed(models: list[Path]) -> bool:
    if importlib.util.find_spec("vllm") is not None:
        return True
    if models:
        print("note: vLLM is not installed: model files' architectures and hf_config unchecked")
    for path in models:
        print(f"{path}: ok, a model description")
    return False


def _check_model_files(paths: list[Path]) -> int:
    """Each model file against the installed vLLM and transformers: a line per problem;
    returns how many errors."""
    from matrix.adapters.model_files import check_model_file

    errors = 0
    for path in paths:
        found = check_model_file(path)
        for problem in [*found.errors, *found.warnings]:
            print(problem)
        if not found.errors:
            print(f"{path}: ok, a model description")
        errors += len(found.errors)
    return errors


def _layout_warnings(case: Case) -> list[str]:
    """A described model's ``fit_slack`` below what its layout's margin rounds up: the fix's
    margin is ceil(N / block) in every attention group, whatever room the prompt's last block
    has, so a model with G attention groups is refused up to G blocks over its fit."""
    spec = case.definition
    if spec.fit_slack == 0 or spec.speculative is None:
        return []
    from matrix.adapters.layout import LayoutError
    from matrix.adapters.protocol import UnsupportedRelease
    from matrix.adapters.selection import select_adapter

    try:
        select_adapter()  # vLLM's start-up switches
        from matrix.adapters.kv_cache import case_groups

        groups = case_groups(spec)
    except (LayoutError, UnsupportedRelease, ValueError, ImportError):
        return []  # the model file's own lines, or the run, say why
    attention = sum(group.kind != "mamba" for group in groups)
    if spec.fit_slack >= attention:
        return []
    # Said once per file and model (the line of the case's name), not once per axis point.
    return [
        f"{case.source}:{case.line}: warning: fit_slack {spec.fit_slack} is below the margin's "
        f"round-up for {spec.model}: one block in each of its {attention} attention groups "
        f"(fit_slack: {attention}, and pool.above at least {attention})"
    ]
