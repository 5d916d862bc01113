"""Placement: best/worst fit on one agent, gangs spanning agents only when they must."""

from __future__ import annotations

import pytest

from det_jupyter.scheduler import Placement, fit


def _view(**free: int) -> dict[str, list[int]]:
    return {agent: list(range(n)) for agent, n in free.items()}


@pytest.mark.parametrize(
    ("fitting", "agent"),
    [("best", "small"), ("worst", "big")],
)
def test_one_agent_by_fitting_policy(fitting: str, agent: str) -> None:
    view = _view(big=8, small=3, mid=5)
    placement = fit(2, view, {"big": 8, "small": 4, "mid": 8}, fitting=fitting, span=True)
    assert placement == (Placement(agent, (0, 1)),)


def test_ties_go_to_the_lowest_agent_id_and_slot_ids() -> None:
    view = {"b": [7, 3, 5], "a": [6, 2, 4]}
    assert fit(2, view, {"a": 8, "b": 8}, fitting="best", span=True) == (Placement("a", (2, 4)),)


def test_a_gang_never_splits_when_one_agent_could_hold_it() -> None:
    view = _view(a=2, b=2)
    assert fit(3, view, {"a": 2, "b": 2}, fitting="best", span=False) is None
    assert fit(2, view, {"a": 2, "b": 2}, fitting="best", span=False) == (Placement("a", (0, 1)),)


def test_spanning_uses_fewest_agents_whole_idle_ones_first() -> None:
    # 10 slots: the two 4-slot agents whole (the idle one before the busy one of equal free
    # count), then the last 2 by best fit: the 2-slot agent rather than the 3-slot one.
    view = {"busy4": [0, 1, 2, 3], "idle4": [0, 1, 2, 3], "c3": [0, 1, 2], "d2": [0, 1]}
    totals = {"busy4": 8, "idle4": 4, "c3": 3, "d2": 2}
    placement = fit(10, view, totals, fitting="best", span=True)
    assert placement == (
        Placement("idle4", (0, 1, 2, 3)),
        Placement("busy4", (0, 1, 2, 3)),
        Placement("d2", (0, 1)),
    )
    worst = fit(10, view, totals, fitting="worst", span=True)
    assert worst is not None and worst[-1] == Placement("c3", (0, 1))


def test_spanning_is_all_or_nothing() -> None:
    assert fit(9, _view(a=4, b=4), {"a": 4, "b": 4}, fitting="best", span=True) is None
    assert fit(8, _view(a=4, b=4), {"a": 4, "b": 4}, fitting="best", span=True) == (
        Placement("a", (0, 1, 2, 3)),
        Placement("b", (0, 1, 2, 3)),
    )
