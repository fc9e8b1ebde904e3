"""Counts in words: ``1 cell``, ``2 cells``, pools ``4-6, 9``. Every message and report that
counts says it so."""

from __future__ import annotations

from collections.abc import Sequence


def plural(count: int, word: str, words: str | None = None) -> str:
    """``1 cell``, ``2 cells``, ``0 cells`` (``words``: an irregular plural)."""
    return f"{count} {word if count == 1 else words or word + 's'}"


def pool_ranges(pools: Sequence[int]) -> str:
    """``4-6, 9``: pool sizes as runs of consecutive ones."""
    spans: list[list[int]] = []
    for pool in pools:
        if spans and pool == spans[-1][1] + 1:
            spans[-1][1] = pool
        else:
            spans.append([pool, pool])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
