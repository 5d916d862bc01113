"""searcher.preview: 0.38.1's Simulate, checked against plans worked out by hand."""

from __future__ import annotations

import pytest

from det_jupyter.searcher import SearcherError, TrialSummary, preview

_HP = {"lr": {"type": "double", "minval": 0.001, "maxval": 0.1}}


def test_asha_plan_worked_by_hand() -> None:
    # max_trials 16, max_length 1000 batches, divisor 4, standard mode, max_rungs 5:
    # rungs = min(5, int(log 1000 / log 4) + 1 = 5, int(log 16 / log 4) + 1 = 3) = 3;
    # standard: brackets of 3 and 2 rungs; trials split by weight 4^2/3 : 4^1/2 -> 11 + 4, the
    # remainder 1 to the first: 12 and 4.
    # 3 rungs at 62, 250, 1000 batches: 12 -> 3 go on (9 stop at 62) -> 1 goes on (2 at 250) -> 1.
    # 2 rungs at 250, 1000: 4 -> 1 goes on (3 stop at 250) -> 1 at 1000.
    config = {"name": "adaptive_asha", "metric": "loss", "max_trials": 16, "max_length": {"batches": 1000},
              "divisor": 4, "mode": "standard", "max_rungs": 5, "bracket_rungs": [], "max_concurrent_trials": 16}
    assert preview(config, _HP) == [TrialSummary(9, "batches", 62), TrialSummary(5, "batches", 250),
                                    TrialSummary(2, "batches", 1000)]
    assert sum(t.count for t in preview(config, _HP)) == 16


def test_whole_length_searchers() -> None:
    assert preview({"name": "single", "metric": "loss"}, {}) == [TrialSummary(1)]
    assert preview({"name": "random", "metric": "loss", "max_trials": 7}, _HP) == [TrialSummary(7)]
    grid = {"a": {"type": "categorical", "vals": [1, 2, 3]}, "b": {"type": "int", "minval": 1, "maxval": 4, "count": 2}}
    assert preview({"name": "grid", "metric": "loss"}, grid) == [TrialSummary(6)]
    assert TrialSummary(6).to_wire() == {"count": 6, "unit": {"maxLength": True}}
    assert TrialSummary(2, "batches", 10).to_wire() == {
        "count": 2, "unit": {"name": "batches", "value": 10, "maxLength": False}}


def test_unpreviewable_and_bad_configs_say_why() -> None:
    with pytest.raises(SearcherError, match="async_halving"):
        preview({"name": "async_halving", "metric": "loss", "num_rungs": 2, "max_trials": 4,
                 "max_length": {"batches": 8}}, _HP)
    with pytest.raises(SearcherError, match="max_trials"):
        preview({"name": "random", "metric": "loss"}, _HP)
