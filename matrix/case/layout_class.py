"""A layout class: what of a KV cache layout the scheduler sees (each group's kind, block size,
window and Mamba mode, in vLLM's group order; layer counts aside), written as one line,
``full/16 + 3x sliding_window/16/w4096``, and read back. Architectures whose layouts have one
class run the same cells (``matrix.case.class_cases``). A Mamba group in mode ``none`` has one
block of ``max_model_len`` tokens, written ``len``, so a class does not depend on the length the
layout was derived at. Pure: no vLLM.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from matrix.case.parts import Group, GroupKind, MambaMode

KINDS: tuple[GroupKind, ...] = ("full", "sliding_window", "chunked_local", "mla", "mamba")
SHORT = {
    "full": "full",
    "sliding_window": "swa",
    "chunked_local": "chunk",
    "mla": "mla",
    "mamba": "mamba",
}
_GROUP = re.compile(r"^(?:(\d+)x )?([a-z_]+)/(\d+|len)(?:/w(\d+))?(?:/(none|align|all))?$")


class LayoutClassError(ValueError):
    """A layout class that does not read."""


@dataclass(frozen=True)
class ClassGroup:
    """One group of a layout class."""

    kind: GroupKind
    block_size: int | None  # None: one block of max_model_len (a Mamba group in mode none)
    window: int | None = None
    mamba_mode: MambaMode | None = None

    def text(self) -> str:
        """The group as a class key writes it."""
        block = "len" if self.block_size is None else str(self.block_size)
        window = f"/w{self.window}" if self.window else ""
        mode = f"/{self.mamba_mode}" if self.mamba_mode else ""
        return f"{self.kind}/{block}{window}{mode}"

    def as_group(self) -> Group:
        """The group as a case writes it."""
        block: int | Literal["max_model_len"] = (
            "max_model_len" if self.block_size is None else self.block_size
        )
        return Group(
            kind=self.kind, block_size=block, window=self.window, mamba_mode=self.mamba_mode
        )


def class_group(
    kind: GroupKind,
    block_size: int,
    window: int | None,
    mode: MambaMode | None,
    max_model_len: int,
) -> ClassGroup:
    """A derived group as a class group (a Mamba block of ``max_model_len`` is ``len``)."""
    whole = kind == "mamba" and mode == "none" and block_size == max_model_len
    return ClassGroup(kind, None if whole else block_size, window, mode)


def class_key(groups: Iterable[ClassGroup]) -> str:
    """The class as one line: the groups in order, a run of equal ones as ``Nx group``."""
    runs: list[list[object]] = []
    for group in groups:
        if runs and runs[-1][0] == group:
            runs[-1][1] = int(str(runs[-1][1])) + 1
        else:
            runs.append([group, 1])
    return " + ".join(
        (f"{count}x " if count != 1 else "") + group.text()  # type: ignore[attr-defined]
        for group, count in runs
    )


def parse_class(key: str) -> tuple[ClassGroup, ...]:
    """A class key's groups; raises :class:`LayoutClassError`."""
    groups: list[ClassGroup] = []
    for part in key.split(" + "):
        match = _GROUP.match(part.strip())
        if match is None or match.group(2) not in KINDS:
            raise LayoutClassError(f"{part!r}: not a layout class group (kind/block[/wN][/mode])")
        count, kind, block, window, mode = match.groups()
        group = ClassGroup(
            kind,  # type: ignore[arg-type]
            None if block == "len" else int(block),
            int(window) if window else None,
            mode,  # type: ignore[arg-type]
        )
        groups += [group] * int(count or 1)
    return tuple(groups)


def class_slug(key: str) -> str:
    """A file name for the class: ``full16_3xswa16w4096``."""
    parts = []
    for part in key.split(" + "):
        match = _GROUP.match(part.strip())
        assert match is not None, part
        count, kind, block, window, mode = match.groups()
        text = f"{count + 'x' if count else ''}{SHORT[kind]}{block}"
        text += f"w{window}" if window else ""
        text += f"{mode}" if mode and mode != "none" else ""
        parts.append(text)
    return "_".join(parts)
