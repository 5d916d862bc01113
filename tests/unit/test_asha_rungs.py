"""The ASHA rung table (``det_jupyter.searcher.rungs``), shared by the notebook widget and the
master's ``GET /api/v1/experiments/{id}/asha-rungs``: exact tables from hand-made reports."""

from __future__ import annotations

from typing import Any

import pytest

from det_jupyter.searcher.rungs import asha_rungs, asha_units
from det_jupyter.widgets import _views


def val(batches: int, loss: float) -> dict[str, Any]:
    return {"steps_completed": batches, "metrics": {"validation_loss": loss}}


LEGACY = {"name": "adaptive_asha", "metric": "validation_loss", "max_length": {"batches": 16},
          "max_trials": 4, "max_rungs": 2, "divisor": 2}


@pytest.mark.parametrize(("searcher", "expected"), [
    (LEGACY, ([8, 16], None)),
    ({**LEGACY, "max_rungs": 5}, ([4, 8, 16], None)),  # 4 trials fill log2(4) + 1 = 3 rungs
    ({"name": "adaptive_asha", "max_time": 400, "time_metric": "batches", "max_trials": 16,
      "max_rungs": 3, "divisor": 4}, ([25, 100, 400], "batches")),
    ({"name": "adaptive_asha", "max_time": 0}, ([], None)),
])
def test_asha_units(searcher: dict[str, Any], expected: tuple[list[int], str | None]) -> None:
    assert asha_units(searcher) == expected


def test_rungs_of_a_finished_legacy_search_with_prefixless_states() -> None:
    # The store's states carry no STATE_ prefix; a trial stopped at rung 0 is "stopped" there.
    trials = [{"id": 7, "state": "COMPLETED"}, {"id": 8, "state": "COMPLETED"},
              {"id": 9, "state": "RUNNING"}, {"id": 10, "state": "ERROR"}]
    validations = {7: [val(8, 0.4), val(16, 0.3)], 8: [val(8, 0.5)], 9: [val(8, 0.45)], 10: [val(4, 0.1)]}
    assert asha_rungs(LEGACY, trials, validations) == [
        {"rung": 0, "units": 8, "reached": [7, 8, 9], "stopped": [8], "running": [9], "best": 0.4},
        {"rung": 1, "units": 16, "reached": [7], "stopped": [], "running": [], "best": 0.3},
    ]


def test_the_widget_uses_the_same_function() -> None:
    assert _views.asha_rungs is asha_rungs
