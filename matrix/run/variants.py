"""The reservation variants: how many blocks an async-load admission keeps free.

``stock`` leaves the installed scheduler alone; every other variant replaces the reservation
on one scheduler instance (see ``SchedulerHandle.install_reservation``), so a variant can never
leak into the next case. N is ``1 + num_spec_tokens + num_lookahead_tokens`` (0 without
speculative decoding).

| variant       | admitting request's margin           | each in-flight load keeps          |
|---------------|--------------------------------------|------------------------------------|
| `none`        | 0                                    | its remaining blocks (0.30)        |
| `original`    | ceil(N / scheduler block size)       | remaining + the margin (0.31)      |
| `group_count` | original x number of groups          | remaining + the margin             |
| `all_groups`  | sum over all groups ceil(N / B_g)    | remaining + the margin             |
| `fixed`       | sum over non-Mamba groups            | remaining for full + N tokens (0.32+) |
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Protocol

from matrix.adapters.protocol import Geometry, SchedulerHandle
from matrix.variant_names import VARIANT_NAMES


def ceil_div(numerator: int, denominator: int) -> int:
    """``numerator / denominator`` rounded up."""
    return -(-numerator // denominator)


class Variant(Protocol):
    """A reservation rule. ``apply`` is called once per scheduler instance, after it is built
    and before any request arrives; it may read ``handle.geometry()`` and call
    ``handle.install_reservation(...)`` (the contract: docs/variants.md). A user's own
    variants implement this too (see ``user_variants``)."""

    @property
    def name(self) -> str:
        """The variant's name, as cases and tables write it."""
        ...

    def apply(self, handle: SchedulerHandle) -> None:
        """Installs this reservation on one scheduler instance, before any request arrives."""
        ...


@dataclass(frozen=True)
class Stock:
    """The installed release's own reservation, left alone."""

    name: str = "stock"

    def apply(self, handle: SchedulerHandle) -> None:
        """The installed release's own reservation: nothing to change."""


@dataclass(frozen=True)
class Reservation:
    """A margin rule from the table above: the admission's margin and how in-flight loads count."""

    name: str
    margin: Callable[[Geometry], int]  # blocks kept free for the admitting request's spec step
    _: KW_ONLY
    margin_per_inflight_load: bool  # each in-flight load also keeps the margin (0.31's shape)
    spec_tokens_through_coordinator: bool  # in-flight loads count full + N tokens (0.32's shape)

    def apply(self, handle: SchedulerHandle) -> None:
        """Installs the margin, computed from this scheduler's geometry, on its instance."""
        margin = self.margin(handle.geometry())
        handle.install_reservation(
            admission_margin=margin,
            per_request_margin=margin if self.margin_per_inflight_load else 0,
            spec_tokens_through_coordinator=self.spec_tokens_through_coordinator,
        )


def _original(g: Geometry) -> int:
    return ceil_div(g.spec_step_tokens, g.scheduler_block_size)


def _per_group(g: Geometry, include_mamba: bool) -> int:
    return sum(
        ceil_div(g.spec_step_tokens, group.block_size)
        for group in g.groups
        if include_mamba or not group.is_mamba
    )


BUILT_IN: tuple[Variant, ...] = (
    Stock(),
    Reservation(
        "none", lambda g: 0, margin_per_inflight_load=False, spec_tokens_through_coordinator=False
    ),
    Reservation(
        "original", _original, margin_per_inflight_load=True, spec_tokens_through_coordinator=False
    ),
    Reservation(
        "group_count",
        lambda g: _original(g) * len(g.groups),
        margin_per_inflight_load=True,
        spec_tokens_through_coordinator=False,
    ),
    Reservation(
        "all_groups",
        lambda g: _per_group(g, include_mamba=True),
        margin_per_inflight_load=True,
        spec_tokens_through_coordinator=False,
    ),
    Reservation(
        "fixed",
        lambda g: _per_group(g, include_mamba=False),
        margin_per_inflight_load=False,
        spec_tokens_through_coordinator=True,
    ),
)
VARIANTS: dict[str, Variant] = {variant.name: variant for variant in BUILT_IN}
# The schema's names and these rules are one list: a variant added to one needs the other.
assert tuple(VARIANTS) == VARIANT_NAMES
