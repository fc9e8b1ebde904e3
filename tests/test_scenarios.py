"""Drawn scenarios are the case format's own data (no vLLM needed)."""

from __future__ import annotations

from hypothesis import given, settings

from matrix.case.events import RunEvent
from matrix.case.format import CaseFile
from matrix.explore.strategies import Draw, layout_family, scenarios


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_every_drawn_scenario_is_a_valid_case_at_any_fit(draw: Draw) -> None:
    for fit in (0, 2, 40):
        case = CaseFile.model_validate(draw.case_data(fit))
        start, stop = draw.pools(fit)
        assert start >= 2 and stop - start == draw.span
        assert isinstance(case.events[-1], RunEvent)
    mamba_modes = {g["mamba_mode"] for g in draw.data["groups"] if g["kind"] == "mamba"}
    assert len(mamba_modes) <= 1
    assert draw.data["groups"][0]["kind"] == "full"


def test_layout_families_follow_the_upstream_columns() -> None:
    def family(*groups: dict[str, object]) -> str:
        return layout_family({"groups": list(groups)})

    full4 = {"kind": "full", "block_size": 4}
    assert family(full4) == "single_group"
    assert family(full4, full4) == "multiple_groups"
    assert family(full4, {"kind": "full", "block_size": 8}) == "different_block_sizes"
    mamba = {"kind": "mamba", "block_size": "max_model_len", "mamba_mode": "none"}
    assert family(full4, mamba) == "mamba_none"
