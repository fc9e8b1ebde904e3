"""Counts in words: ``1 cell``, ``2 cells``. Every message and report that counts says it so."""

from __future__ import annotations


def plural(count: int, word: str, words: str | None = None) -> str:
    """``1 cell``, ``2 cells``, ``0 cells`` (``words``: an irregular plural)."""
    return f"{count} {word if count == 1 else words or word + 's'}"
