"""A user's own reservation variants, loaded beside the built-ins without importing vLLM.

From the command line, ``--matrix-variant package.module:NAME`` (or ``path/to/file.py:NAME``),
repeatable; from installed packages, entry points in the group ``matrix.run.variants``. ``NAME`` is
an object implementing :class:`matrix.run.variants.Variant` (a ``name`` and ``apply(handle)``); the
contract a variant may rely on is in docs/variants.md.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from types import ModuleType

from matrix.run.variants import VARIANTS, Variant
from matrix.variant_names import VARIANT_ID, VARIANT_NAMES

ENTRY_POINT_GROUP = "matrix.variants"


class VariantLoadError(Exception):
    """A variant that cannot be loaded; the message is one line naming the reference."""


def _module(name: str) -> ModuleType:
    if not name.endswith(".py"):
        return importlib.import_module(name)
    path = Path(name).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    module_name = f"matrix_user_variant_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


def _checked(reference: str, candidate: object) -> Variant:
    name = getattr(candidate, "name", None)
    if not isinstance(name, str) or not callable(getattr(candidate, "apply", None)):
        raise VariantLoadError(
            f"{reference}: not a variant (an object with a name and apply(handle); "
            "see docs/variants.md)"
        )
    if not re.fullmatch(VARIANT_ID, name):
        raise VariantLoadError(
            f"{reference}: variant name {name!r} must match {VARIANT_ID} (it is part of test ids)"
        )
    if name in (*VARIANT_NAMES, "default"):
        raise VariantLoadError(f"{reference}: variant name {name!r} is taken by a built-in")
    return candidate  # type: ignore[return-value]  # checked structurally above


def load_reference(reference: str) -> Variant:
    """The variant a ``module:NAME`` reference names."""
    module_name, colon, attribute = reference.rpartition(":")
    if not colon or not module_name or not attribute:
        raise VariantLoadError(f"{reference}: write package.module:NAME or path/to/file.py:NAME")
    try:
        candidate = getattr(_module(module_name), attribute)
    except (ImportError, OSError, AttributeError, SyntaxError) as error:
        raise VariantLoadError(f"{reference}: cannot load: {error}") from None
    return _checked(reference, candidate)


def entry_point_variants() -> list[tuple[str, Variant]]:
    """Variants installed packages declare, as (entry point, variant)."""
    found = []
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        where = f"entry point {entry.name} = {entry.value}"
        try:
            candidate = entry.load()
        except (ImportError, AttributeError, SyntaxError) as error:
            raise VariantLoadError(f"{where}: cannot load: {error}") from None
        found.append((where, _checked(where, candidate)))
    return found


def run_variants(references: Iterable[str]) -> dict[str, Variant]:
    """The run's variants: the built-ins, then installed entry points, then ``references``;
    two with one name are an error naming both."""
    variants: dict[str, Variant] = dict(VARIANTS)
    origin: dict[str, str] = {}
    loaded = [*entry_point_variants(), *((r, load_reference(r)) for r in references)]
    for where, variant in loaded:
        if variant.name in origin:
            raise VariantLoadError(
                f"{where}: variant name {variant.name!r} repeats (first: {origin[variant.name]})"
            )
        origin[variant.name] = where
        variants[variant.name] = variant
    return variants
