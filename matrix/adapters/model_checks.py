"""A model file (a config.json or a description) checked against the installed vLLM before a
case runs it: what ``validate`` and ``show-layout`` report, a line per problem at its key.

- a description: the architecture (vLLM's registry; a dropped one says when), its
  ``hf_config`` (transformers' config class, ``matrix.adapters.model_files``);
- a config.json: vLLM's ``ModelConfig`` over its folder (``matrix.adapters.config_json``);
- both: the layout derived with the default settings, so that what the model class's Mamba
  state functions read and the config lacks (LFM2's ``conv_dim``) is a line here, not a
  traceback in every cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from matrix.adapters.model_files import check_hf_config
from matrix.adapters.registry import architecture_problem, quiet_imports
from matrix.architectures import known_to
from matrix.case.config_json import ConfigModel, config_model
from matrix.case.connector import PREFILL_CONNECTORS
from matrix.case.expansion import Case
from matrix.case.format import CaseFile
from matrix.case.loading import CaseFileError, LoadedDocument, read_description, read_document
from matrix.case.model import ModelDescription, PromptInBlocks
from matrix.installed import installed_vllm_version

MAMBA_KINDS = frozenset({"mamba", "full+mamba"})


@dataclass
class ModelFileCheck:
    """The problems of one model file, each a line: errors, and warnings about this install
    rather than the file."""

    errors: list[CaseFileError] = field(default_factory=list)
    warnings: list[CaseFileError] = field(default_factory=list)


def needs_vllm(path: Path) -> bool:
    """Whether checking this model file imports vLLM: a config.json (vLLM reads it), a Mamba
    state (the model class computes it), or a release whose architectures were not recorded."""
    if path.suffix == ".json" or known_to(installed_vllm_version()) is None:
        return True
    return bool(set(read_description(path).layer_kinds()) & MAMBA_KINDS)


CHECK_LENGTH = 1024  # the length a model file's layout is checked at (a case's default)


def check_length(described: ModelDescription | ConfigModel) -> int:
    """The length a model file is checked at: the case default, or fewer where the config
    allows fewer positions (Whisper's 448); raises ``ConfigJsonError`` for a config.json vLLM
    cannot read."""
    if not isinstance(described, ConfigModel):
        return CHECK_LENGTH
    from matrix.adapters.config_json import model_config

    return min(CHECK_LENGTH, int(model_config(described).max_model_len))


def default_layout(described: ModelDescription | ConfigModel) -> None:
    """Derives a model's layout with the default settings; raises ``LayoutError``."""
    from matrix.adapters.kv_cache import layout_for
    from matrix.adapters.selection import select_adapter

    select_adapter()  # vLLM's start-up switches
    case = CaseFile.model_validate(
        {
            "name": "check",
            "model": "check",
            "described": described,
            "max_model_len": check_length(described),
            "pool": 2,
            "requests": [{"id": "a", "prompt": 1}],
        }
    )
    with quiet_imports():
        layout_for(case)


def check_model_file(path: Path) -> ModelFileCheck:
    """A model file checked against the installed vLLM and transformers; raises
    :class:`CaseFileError` when the file itself does not load."""
    if path.suffix == ".json":
        return _check_config_json(path)
    return _check_description(path)


def _check_config_json(path: Path) -> ModelFileCheck:
    from matrix.adapters.config_json import ConfigJsonError, description
    from matrix.adapters.layout import LayoutError

    found = ModelFileCheck()
    model = config_model(path)
    try:
        description(model)
        default_layout(model)
    except ConfigJsonError as error:  # at the path as the user gave it
        found.errors.append(CaseFileError(path, error.line, error.message))
    except LayoutError as error:
        found.errors.append(CaseFileError(path, 1, f"config: {error}"))
    return found


def _check_description(path: Path) -> ModelFileCheck:
    model = read_description(path)
    document = read_document(path)
    found = ModelFileCheck()

    def error(where: tuple[str | int, ...], message: str) -> None:
        found.errors.append(document.error(where, message))

    if model.hf_config:
        check_hf_config(model, error)
    problem = architecture_problem(model.architecture)
    if problem is not None:
        error(("architecture",), problem)
    elif set(model.layer_kinds()) & MAMBA_KINDS:
        _check_mamba_state(model, path, document, found)
    return found


def _check_mamba_state(
    model: ModelDescription, path: Path, document: LoadedDocument, found: ModelFileCheck
) -> None:
    from vllm.model_executor.models import ModelRegistry

    line = document.line_of(("architecture",))
    try:
        with quiet_imports():
            model_class = ModelRegistry.models[model.architecture].load_model_cls()
    except ImportError as failed:
        message = f"architecture: warning: {model.architecture} does not import here ({failed})"
        found.warnings.append(CaseFileError(path, line, message))
        return
    if not hasattr(model_class, "get_mamba_state_shape_from_config"):
        message = (
            f"architecture: vLLM's {model.architecture} has no Mamba state "
            "(get_mamba_state_shape_from_config), and layer_pattern has Mamba layers"
        )
        found.errors.append(CaseFileError(path, line, message))
        return
    if found.errors:  # hf_config's own problems come first; the state would only repeat them
        return
    from matrix.adapters.layout import LayoutError

    try:
        default_layout(model)
    except LayoutError as error:
        where = ("hf_config",) if str(error).startswith("hf_config") else ("architecture",)
        found.errors.append(CaseFileError(path, document.line_of(where), str(error)))


# A layout error's first words -> the case key to fix.
LAYOUT_KEYS = {"device": ("layout", "device"), "max_model_len": ("max_model_len",)}


@dataclass(frozen=True)
class CaseLayout:
    """What the installed vLLM derives of a model case for ``validate``: why it cannot (a
    ``LayoutError``'s message), or its number of attention groups; neither where the run says
    why (a release that cannot build the model)."""

    refused: str | None = None
    attention_groups: int | None = None
    # The answer turned on a model module that does not import here: another install of the
    # same release can answer otherwise.
    depends_on_install: bool = False


def derive_case_layout(spec: CaseFile) -> CaseLayout:
    """A model case's layout as the installed vLLM derives it (imports vLLM)."""
    from matrix.adapters.kv_cache import case_groups
    from matrix.adapters.layout import LayoutError
    from matrix.adapters.protocol import UnsupportedRelease
    from matrix.adapters.selection import select_adapter

    try:
        select_adapter()  # vLLM's start-up switches
        with quiet_imports():
            groups = case_groups(spec)
    except LayoutError as error:
        message = str(error)
        if "does not import here" in message:
            return CaseLayout(depends_on_install=True)
        return CaseLayout(refused=message)
    except ImportError:
        return CaseLayout(depends_on_install=True)  # the run says why
    except (UnsupportedRelease, ValueError):
        return CaseLayout()  # the run says why
    return CaseLayout(attention_groups=sum(group.kind != "mamba" for group in groups))


def case_layout_problem(
    case: Case, derived: CaseLayout | None = None
) -> tuple[str | None, str | None]:
    """A model case's derived layout (``derived``, else derived here): a problem (the device
    cannot derive it, a max_model_len the model refuses...) and a warning (``fit_slack`` below
    the margin's round-up), each a line or None. A release that cannot build the model is the
    model file's line, not this."""
    if derived is None:
        derived = derive_case_layout(case.definition)
    if derived.refused is not None:
        message = derived.refused
        key = LAYOUT_KEYS.get(message.split(" ")[0].rstrip(":"), ("model",))
        problem = read_document(case.source).error(key, message)
        return f"{case.source}:{problem.line}: [{case.case_id}] {problem.message}", None
    if derived.attention_groups is None:
        return None, None
    return None, _fit_slack_warning(case, derived.attention_groups)


def _fit_slack_warning(case: Case, attention: int) -> str | None:
    """A model's ``fit_slack`` below what its layout's margin rounds up: the fix's margin is
    ceil(N / block) in every attention group, whatever room the prompt's last block has, so a
    model with G attention groups is refused up to G blocks over its fit. The default too (none
    written: 0), for a layout of several attention groups whose whole prompt loads (a prefill
    connector's), ending past a block boundary (where the step fits its last block, yet the
    round-up refuses) and ``fixed`` expected to pass: its cells would fail as over-reserving
    what the docs tolerate. A written ``fit_slack: 0`` says no refusal is tolerated; a case
    expecting ``fixed`` to refuse records the round-up."""
    spec = case.definition
    written = "fit_slack" in spec.model_fields_set
    if spec.speculative is None or spec.fit_slack >= attention:
        return None
    if written and spec.fit_slack == 0:
        return None
    past = any(isinstance(r.prompt, PromptInBlocks) and r.prompt.offset > 0 for r in spec.requests)
    whole = spec.connector in PREFILL_CONNECTORS
    if not written and not (attention > 1 and past and whole):
        return None
    if not written and spec.expectation_for("fixed") != "pass":
        return None
    slack = f"fit_slack {spec.fit_slack}" if written else "fit_slack 0 (the default)"
    # Said once per file and model (the line of the case's name), not once per axis point.
    return (
        f"{case.source}:{case.line}: warning: {slack} is below the margin's round-up for "
        f"{spec.model}: one block in each of its {attention} attention groups (fit_slack: "
        f"{attention}, and pool.above at least {attention})"
    )
