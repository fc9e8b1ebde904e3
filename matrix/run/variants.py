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
| `proposed`    | its own need beyond its load, per group (below) | remaining for full + N tokens |

``proposed`` is a candidate fix that no release ships: where ``fixed`` keeps ceil(N / B_g) per
non-Mamba group whatever the prompt's alignment, it keeps what the admitting request will
need beyond what its load allocates, counted by each non-Mamba group's manager for the
request's full + N tokens (exact at unaligned prompts), plus the second state block a Mamba
``align`` group's promotion takes when the load ends on a block boundary, which the admission
counts as one (``SchedulerHandle.install_reservation(admission_need_per_group=True)``).
In-flight loads keep what ``fixed`` keeps: their coordinator count already includes that block.
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
    admission_need_per_group: bool = False  # the admitting request's own need, per group

    def apply(self, handle: SchedulerHandle) -> None:
        """Installs the margin, computed from this scheduler's geometry, on its instance."""
        margin = self.margin(handle.geometry())
        handle.install_reservation(
            admission_margin=margin,
            per_request_margin=margin if self.margin_per_inflight_load else 0,
            spec_tokens_through_coordinator=self.spec_tokens_through_coordinator,
            admission_need_per_group=self.admission_need_per_group,
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
    # A candidate, not a release's rule: the margin counted by vLLM's managers for the request.
    Reservation(
        "proposed",
        lambda g: 0,
        margin_per_inflight_load=False,
        spec_tokens_through_coordinator=True,
        admission_need_per_group=True,
    ),
)
VARIANTS: dict[str, Variant] = {variant.name: variant for variant in BUILT_IN}
# The schema's names and these rules are one list: a variant added to one needs the other.
assert tuple(VARIANTS) == VARIANT_NAMES
