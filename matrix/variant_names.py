"""Variant names: the built-in ones, the pattern every name follows, and the check that a case
names only the variants its run knows (the schema's ``expect`` keys and ``variants``)."""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal, get_args

from pydantic import Field

BuiltInVariant = Literal[
    "stock", "none", "original", "group_count", "all_groups", "fixed", "proposed"
]
VARIANT_NAMES: tuple[BuiltInVariant, ...] = get_args(BuiltInVariant)
# The upstream PR's names for its rows; the other variants keep their own in the tables.
# (The rules themselves are matrix/run/variants.py, which checks it has one per name.)
TABLE_LABELS: dict[str, str] = {
    "original": "Original",
    "group_count": "Original x group count",
    "fixed": "This fix",
}
# A variant's name is part of test ids and a pytest marker. Built-in names are the Literal
# above; a user's own variants (see matrix/run/user_variants.py) are known only when a run loads
# them, so case files name variants by this pattern and each case is checked against the
# variants of its run (``CaseFile.model_validate(..., context=variant_context(names))``).
VARIANT_ID = r"^[a-z][a-z0-9_]*$"
VariantName = Annotated[str, Field(pattern=VARIANT_ID)]


def table_label(variant: str) -> str:
    """A variant's row name in the summary tables."""
    return TABLE_LABELS.get(variant, variant)


def variant_context(names: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """The validation context that makes ``names`` the known variants."""
    return {"variants": names}


def known_variants(context: Any) -> tuple[str, ...]:
    """The variants a validation context makes known (the built-ins without one)."""
    if isinstance(context, dict) and "variants" in context:
        return tuple(context["variants"])
    return VARIANT_NAMES


def unknown_variant(name: str, known: tuple[str, ...]) -> str:
    """The message for a variant name the run does not know, with a did-you-mean."""
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    listed = ", ".join(f"'{k}'" for k in known)
    return f"unknown variant '{name}': {hint}variants are {listed}"
