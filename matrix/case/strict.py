"""What every part of the case format shares: the strict model base (unknown keys rejected, no
type coercion, frozen) and the error a rule spanning several fields raises with its place."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic_core import ErrorDetails


class PlacedError(ValueError):
    """A rule that spans several fields, with the place in the case that breaks it, so the
    loader can name that line rather than the case's first."""

    def __init__(self, location: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.location = location


def problem_place(problem: ErrorDetails) -> tuple[str | int, ...]:
    """Where a validation problem lies in the case: a spanning rule's place, else pydantic's."""
    placed = problem.get("ctx", {}).get("error")
    return placed.location if isinstance(placed, PlacedError) else tuple(problem["loc"])


class Strict(BaseModel):
    """The base of every model of the case format: YAML already gives typed values, so "16" or
    true where a number belongs is a mistake, not something to coerce."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
