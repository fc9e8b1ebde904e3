"""Which file a case's ``model:`` names, and whether a case names its model in a way that runs.

A model is a file the layout is derived from, or an engine config directory beside hand-written
groups:

- ``model: path/to/config.json``: the model's own config.json (vLLM reads its folder);
- ``model: path/to/my-model.yaml``: a model description (numbers copied from a config.json, or a
  hypothetical model's); a bare file name is looked up beside the case, then in ``models/``;
- ``model: <name>``: ``models/<name>/config.json`` beside the case, else ``models/<name>.yaml``
  (or ``.yml``) beside it, else the shipped ``cases/models/`` ones;
- else an engine config directory (``llama-tiny``, the default, or a directory holding a
  ``config.json``) whose groups the case writes out.

Paths are relative to the case file's folder. Pure: no vLLM here.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from matrix.case.config_json import CONFIG_JSON
from matrix.case.shipped import ENGINE_CONFIGS, shipped_cases
from matrix.case.strict import PlacedError

ENGINE_CONFIG_DEFAULT = "llama-tiny"
# Model files live in a folder of this name beside the cases that use them; the shipped ones in
# the repository's cases/models/. A YAML file in such a folder is never a case.
MODELS_FOLDER = "models"
SHIPPED_MODELS = shipped_cases() / MODELS_FOLDER
DESCRIPTION_SUFFIXES = (".yaml", ".yml")


def _is_name(model: str) -> bool:
    return model.replace("-", "").replace("_", "").replace(".", "").isalnum()


def present(path: Path) -> bool:
    """Whether ``path`` is there as something other than a folder: a file, or a link or a
    device named like one, which the reader then refuses in its own words (a model file that
    links to /dev/zero is not "no model")."""
    return path.is_symlink() or (path.exists() and not path.is_dir())


def model_file(model: str, case_dir: Path | None) -> Path | None:
    """The model file (a config.json or a description) a case's ``model:`` names, or None
    for an engine config directory or nothing. A path is returned whether or not it exists,
    so that the loader can say it does not."""
    base = case_dir if case_dir is not None else Path.cwd()
    folders = [case_dir / MODELS_FOLDER] if case_dir is not None else []
    if model.endswith(".json") or model.endswith(DESCRIPTION_SUFFIXES):
        if Path(model).name == model:  # a bare file name: beside the case, else models/
            for folder in [base, *folders, SHIPPED_MODELS]:
                if present(folder / model):
                    return folder / model
        return base / model
    if not _is_name(model):
        return None
    for folder in [*folders, SHIPPED_MODELS]:
        descriptions = [folder / f"{model}{suffix}" for suffix in DESCRIPTION_SUFFIXES]
        for candidate in (folder / model / CONFIG_JSON, *descriptions):
            if present(candidate):
                return candidate
    return None


def model_files(folder: Path) -> list[Path]:
    """The model files of a ``models/`` folder, sorted: its descriptions (any of
    :data:`DESCRIPTION_SUFFIXES`) and its ``*/config.json``."""
    found = [f for suffix in DESCRIPTION_SUFFIXES for f in folder.glob(f"*{suffix}")]
    return sorted([*found, *folder.glob(f"*/{CONFIG_JSON}")])


def model_names(folder: Path) -> list[str]:
    """The names a case's ``model:`` gives the models of a ``models/`` folder, sorted: a
    config.json's folder name, a description's file name without its suffix."""
    files = model_files(folder)
    return sorted({f.parent.name if f.name == CONFIG_JSON else f.stem for f in files})


# Shipped engine config directories found so far: they do not move while the matrix runs,
# and every scheduler's config asks for one.
_shipped_directories: dict[str, Path] = {}


def model_directory(model: str) -> Path | None:
    """An engine config directory holding a config.json: a shipped one in ``matrix/models/``,
    else a path; else None."""
    if model in _shipped_directories:
        return _shipped_directories[model]
    shipped = ENGINE_CONFIGS / model
    if (shipped / CONFIG_JSON).is_file():
        _shipped_directories[model] = shipped
        return shipped
    path = Path(model)
    return path if (path / CONFIG_JSON).is_file() else None


def shipped_models() -> list[str]:
    """The names of the shipped models (a config.json folder or a description), sorted."""
    return model_names(SHIPPED_MODELS)


def is_model_file(path: Path) -> bool:
    """A model file, not a case: a YAML file in a ``models/`` folder, or a config.json."""
    return path.parent.name == MODELS_FOLDER or path.name == CONFIG_JSON


def no_model(model: str, case_dir: Path | None = None) -> str:
    """Why ``model`` names nothing, with a did-you-mean (among the models beside the case, the
    shipped ones and the engine configs) rather than every model there is."""
    shipped = shipped_models()
    local = model_names(case_dir / MODELS_FOLDER) if case_dir is not None else []
    engines = [p.parent.name for p in ENGINE_CONFIGS.glob(f"*/{CONFIG_JSON}")]
    known = [*local, *shipped, *engines]
    guess = difflib.get_close_matches(model, known, n=1, cutoff=0.6)
    if Path(model).is_dir():
        return f"'{model}' is a directory without a {CONFIG_JSON}: not a model"
    hint = (
        f"did you mean '{guess[0]}'?" if guess else f"{len(shipped)} are shipped in cases/models/"
    )
    return (
        f"no model '{model}': {hint} (or a path to a {CONFIG_JSON} or a model .yaml, or an "
        f"engine config directory holding a {CONFIG_JSON})"
    )


def check_model(model: str, described: object | None, has_groups: bool, has_layout: bool) -> None:
    """A case names a model file (its groups derived) or an engine config directory with its
    groups written out; raises :class:`PlacedError` otherwise."""
    if described is None and model_directory(model) is None:
        raise PlacedError(("model",), no_model(model))
    if described is not None and has_groups:
        raise PlacedError(("groups",), "a model file's groups are derived: drop 'groups'")
    if described is None and not has_groups:
        raise PlacedError(
            ("groups",),
            "'groups' is needed unless 'model' names a model file (its config.json or a "
            "description)",
        )
    if described is None and has_layout:
        raise PlacedError(("layout",), "'layout' is for a model file's derived groups")
