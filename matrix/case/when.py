"""Expectations that hold where several matrix axes take given labels together (``when:``).

A case whose expectation depends on two axes at once (Mamba ``align`` *and* a prompt one token
past a block boundary) would otherwise need one flat axis with a label per combination::

    matrix:
      mode: {path: layout.mamba_mode, values: [none, align]}
      prompt: {path: requests.0.prompt.offset, values: {aligned: 0, past: 1}}
    when:
      - {mode: align, prompt: past, expect: {none: stall, fixed: stall}}
      - {prompt: [aligned, past], expect: {group_count: not_admitted}}

Each entry names one or more axes with a label, or a list of labels any of which holds, and the
``expect`` entries that apply where all of them hold. Entries apply in order over the case's
``expect`` and the axes' own ``expect.*`` overlays: a later one wins. Pure pydantic.

``release`` is one more axis every case has: the vLLM release the run drives (``0.34``), for
what a release's own code changed (``{release: ["0.30", "0.31"], expect: {none: pass}}``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ConfigDict, model_validator

from matrix.case.strict import PlacedError, Strict
from matrix.releases import RELEASES

# The axis every case has: the release the run drives, labelled as RELEASES names it.
RELEASE_AXIS = "release"


def label_of(value: Any) -> str:
    """An axis value's label, as case ids write it (booleans in YAML's spelling)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


class When(Strict):
    """One ``when:`` entry: its axis conditions (any other key) and the expectations they
    bring. ``expect`` is checked like a case's own ``expect`` once it applies."""

    # The conditions are the entry's other keys (axis names), so extra keys are its content.
    model_config = ConfigDict(extra="allow", frozen=True, strict=True)

    expect: dict[str, Any]

    @model_validator(mode="after")
    def _conditions(self) -> When:
        if not self.expect:
            raise ValueError("an entry brings at least one expectation: expect: {variant: ...}")
        if not self.conditions():
            raise ValueError("an entry names at least one axis and its label: {axis: label, ...}")
        return self

    def conditions(self) -> dict[str, tuple[str, ...]]:
        """Each axis this entry names -> the labels any of which satisfies it."""
        conditions = {}
        for axis, wanted in (self.model_extra or {}).items():
            values = wanted if isinstance(wanted, list) else [wanted]
            conditions[axis] = tuple(label_of(value) for value in values)
        return conditions

    def holds(self, labels: Mapping[str, str]) -> bool:
        """Whether every condition holds at the point whose axis labels are ``labels``."""
        return all(labels.get(axis) in wanted for axis, wanted in self.conditions().items())


def check_when(entries: Sequence[When], axis_labels: Mapping[str, Sequence[str]]) -> None:
    """Every entry names axes of the case's matrix, with labels they have; raises
    :class:`PlacedError` at the entry's key otherwise."""
    if RELEASE_AXIS in axis_labels:
        raise PlacedError(
            ("matrix", RELEASE_AXIS),
            f"'{RELEASE_AXIS}' is the release a run drives, in when: entries: name the axis "
            "otherwise",
        )
    axis_labels = {**axis_labels, RELEASE_AXIS: tuple(RELEASES)}
    for index, entry in enumerate(entries):
        for axis, wanted in entry.conditions().items():
            where = ("when", index, axis)
            if axis not in axis_labels:
                guess = difflib.get_close_matches(axis, list(axis_labels), n=1)
                hint = f": did you mean '{guess[0]}'?" if guess else ""
                known = ", ".join(axis_labels) or "none"
                raise PlacedError(where, f"no matrix axis '{axis}'{hint} (axes: {known})")
            for label in wanted:
                if label not in axis_labels[axis]:
                    raise PlacedError(where, _unknown_label(axis, label, axis_labels[axis]))


def _unknown_label(axis: str, label: str, labels: Sequence[str]) -> str:
    message = f"axis '{axis}' has no label '{label}' (its labels: {', '.join(labels)})"
    if label in ("true", "false"):
        # YAML 1.1 reads yes/no/on/off (unquoted) as booleans.
        message += "; an unquoted on/off/yes/no reads as a boolean in YAML: quote it"
    return message
