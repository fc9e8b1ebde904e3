"""Where the shipped case files are: ``matrix/cases`` in an installed wheel (pyproject.toml puts
them there, model descriptions included), else the ``cases/`` folder beside the package in a
checkout. One place, so the cases and the model descriptions are found the same way."""

from __future__ import annotations

from pathlib import Path


def shipped_cases() -> Path:
    package = Path(__file__).resolve().parent
    packaged = package / "cases"
    return packaged if packaged.is_dir() else package.parent / "cases"
