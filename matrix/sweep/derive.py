"""One architecture in this process (a sweep worker, which imported vLLM): its model type, its
default config written, vLLM's reading of it, and the layout vLLM derives (``show-layout``'s
path: ``matrix.adapters.kv_cache.layout_for``), as a baseline row: a layout class, or the named
reason there is none. Nothing raises: whatever fails is a row that says so, in one line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from matrix.case.baselines import Row, Status
from matrix.case.layout_class import class_group, class_key
from matrix.sweep.scope import Architecture

# The longest a swept layout is derived for: the shipped cases' longest; a config allowing
# fewer positions (GPT-2's 1024) is derived at its own.
SWEPT_LENGTH = 4096
DEVICE = "sm80"  # the matrix's default device (FlashAttention's 16-token blocks; MLA on Triton)
T = TypeVar("T")
_INSPECTED = re.compile(r"Model architectures \[([^\]]*)\] failed to be inspected")
_MISSING = re.compile(r"No module named '([^']+)'")


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


def _package(module: str) -> str:
    """The distribution a missing module belongs to: its top package (vLLM's own: the parts
    the lean install lacks)."""
    top = module.split(".")[0]
    return CUDA_ONLY if top == "vllm" else top


# What vLLM's model inspection raised in this worker for the architecture being derived
# (vLLM logs it and says only "failed to be inspected"): the first failure is the cause; a
# module imported again after a failure fails otherwise (its half-imported parts remain).
_inspection_failures: list[BaseException] = []


def inspect_here(inspect: Callable[[], T]) -> T:
    """vLLM's model inspection run in this process (a throwaway worker), its failure kept."""
    try:
        return inspect()
    except Exception as error:
        _inspection_failures.append(error)
        raise


# What a model module lacks when the part of vLLM it imports is built for CUDA only (its
# flash attention's kernels): the same words however the import fails (a first import says
# the extension is missing, a later one in the same worker that a name is).
CUDA_ONLY = "vllm's CUDA-only parts"


def _root(error: BaseException) -> BaseException:
    """The first ImportError that names a missing module, down the chain of causes
    (transformers' lazy imports raise their own, from the import that failed), else
    ``error``."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen and len(seen) < 16:
        seen.append(current)
        if isinstance(current, ModuleNotFoundError) and current.name:
            return current
        current = current.__cause__ or current.__context__
    return error


def _import_failure(error: BaseException) -> str:
    """The package an ImportError says is missing, else its own words."""
    error = _root(error)
    named = getattr(error, "name", None) or _MISSING.search(str(error))
    if isinstance(named, re.Match):
        named = named.group(1)
    if str(named or error).startswith("vllm"):
        return CUDA_ONLY
    return _package(named) if named else _one_line(error)


def _missing_package(message: str, names: list[str]) -> str | None:
    """The package a model module lacks: named in ``message``, else the first import failure
    of vLLM's inspection, else found by importing the class of each architecture named."""
    named = _MISSING.search(message)
    if named is not None:
        return _package(named.group(1))
    for failure in _inspection_failures:
        if isinstance(failure, ImportError):
            return _import_failure(failure)
    from vllm.model_executor.models import ModelRegistry

    for name in names:
        entry = ModelRegistry.models.get(name)
        if entry is None:
            continue
        try:
            entry.load_model_cls()  # a module may import its class's own modules lazily
        except ImportError as error:
            return _import_failure(error)
        except Exception as error:  # a module that raises at import: say what
            return _one_line(error)
    return None


def classify(message: str, architecture: str) -> tuple[Status, str]:
    """A failure's outcome and reason, from its one line."""
    if ("layer type" in message and "not known" in message) or "not modelled" in message:
        return "unmodelled", message
    inspected = _INSPECTED.search(message)
    names = [n.strip(" '\"") for n in inspected.group(1).split(",")] if inspected else []
    if inspected or "does not import here" in message or "No module named" in message:
        package = _missing_package(message, names or [architecture])
        if package is not None:
            return "missing_package", package
    return "refused", message


def _case(model: object, max_model_len: int) -> object:
    from matrix.case.format import CaseFile

    return CaseFile.model_validate(
        {
            "name": "sweep",
            "model": "sweep",
            "described": model,
            "layout": {"device": DEVICE},
            "max_model_len": max_model_len,
            "pool": 2,
            "requests": [{"id": "a", "prompt": 1}],
        }
    )


def derive_row(architecture: Architecture, folder: Path) -> Row:
    """The architecture's row: its default config written under ``folder`` and its layout."""
    from matrix.sweep.defaults import DefaultConfigError, write_default
    from matrix.sweep.mapping import model_type_of

    _inspection_failures.clear()
    mapped = model_type_of(architecture.name, architecture.module)
    if mapped is None:
        return Row(architecture.name, architecture.table, "-", "unmapped", "no model type")

    def row(status: Status, detail: str) -> Row:
        detail = _reason(detail.replace(str(folder), "<sweep>").replace("\t", " "))
        return Row(architecture.name, architecture.table, mapped.model_type, status, detail)

    try:
        path = write_default(architecture.name, mapped.model_type, folder)
    except DefaultConfigError as error:
        return row("refused", str(error))
    try:
        return row("layout", _layout_class(path))
    except _Refusal as refusal:
        return row(*classify(str(refusal), architecture.name))
    except Exception as error:  # the matrix's own failure: a row, never a traceback
        return row("error", _one_line(error))


def config_row(path: Path, architecture: str, model_type: str) -> Row:
    """The row of a user's config.json (``sweep --config``), derived as a default config is."""

    def row(status: Status, detail: str) -> Row:
        return Row(architecture, "-", model_type, status, _reason(detail.replace("\t", " ")))

    try:
        return row("layout", _layout_class(path))
    except _Refusal as refusal:
        return row(*classify(str(refusal), architecture))
    except Exception as error:  # the matrix's own failure: a row, never a traceback
        return row("error", _one_line(error))


def timed_out_row(architecture: Architecture, why: str) -> Row:
    """The row of an architecture whose derivation ran out of time."""
    return Row(architecture.name, architecture.table, "-", "error", why)


def died_row(architecture: Architecture, exit_code: int) -> Row:
    """The row of an architecture whose worker died deriving it."""
    how = f"signal {-exit_code}" if exit_code < 0 else f"exit code {exit_code}"
    return Row(architecture.name, architecture.table, "-", "error", f"the worker died ({how})")


_PLACE = re.compile(r"^(?:<sweep>/\S+?:\d+: )?(?:config: )?")


def _reason(message: str) -> str:
    """A reason without the place of the default config it was found in (the sweep's own
    folder: nothing a reader fixes there)."""
    return _PLACE.sub("", message, count=1)


class _Refusal(Exception):
    """vLLM, transformers or the matrix refuses the default config; the one-line reason."""


def _layout_class(path: Path) -> str:
    """The class of the layout vLLM derives from the config.json at ``path``; raises
    :class:`_Refusal` with the reason."""
    from matrix.adapters.config_json import ConfigJsonError, model_config
    from matrix.adapters.kv_cache import layout_for
    from matrix.adapters.layout import LayoutError
    from matrix.adapters.registry import quiet_imports
    from matrix.case.config_json import config_model
    from matrix.case.reading import CaseFileError

    try:
        with quiet_imports():
            model = config_model(path)
            length = min(SWEPT_LENGTH, int(model_config(model).max_model_len))
            case = _case(model, length)
            layout = layout_for(case)  # type: ignore[arg-type]
    except (CaseFileError, ConfigJsonError, LayoutError) as error:
        message = getattr(error, "message", None) or str(error)
        line = str(message).splitlines()[0] if str(message) else type(error).__name__
        raise _Refusal(line) from None
    except ValueError as error:  # pydantic's refusal of the case the config makes
        raise _Refusal(_one_line(error)) from None
    groups = [
        class_group(g.kind, g.block_size, g.window, g.mamba_mode, length) for g in layout.groups
    ]
    return class_key(groups)
