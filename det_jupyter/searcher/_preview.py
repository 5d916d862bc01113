"""The training plan of a search, without running it (0.38.1's ``searcher.Simulate``, behind
``det preview-search``): how many trials train how far."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._actions import SearcherError
from ._asha import AshaSearcher, _time_budget
from ._base import config_int
from ._hparams import grid_size


@dataclass(frozen=True)
class TrialSummary:
    """``count`` trials train to ``units`` of ``unit`` (None: to the searcher's full length)."""

    count: int
    unit: str | None = None
    units: int | None = None

    def to_wire(self) -> dict[str, Any]:
        """``v1TrialSummary``."""
        if self.units is None:
            return {"count": self.count, "unit": {"maxLength": True}}
        return {"count": self.count, "unit": {"name": self.unit, "value": self.units, "maxLength": False}}


def preview(searcher_config: dict[str, Any], hyperparameters: dict[str, Any]) -> list[TrialSummary]:
    """The plan of a (defaults-filled) searcher config, as 0.38.1 simulates it: single, random and
    grid train every trial to the end; adaptive_asha stops trials at each rung but the top one's
    share (``divisor``), by rung length. Other searchers: SearcherError, as in 0.38.1."""
    name = searcher_config.get("name")
    if name == "single":
        return [TrialSummary(1)]
    if name == "random":
        return [TrialSummary(config_int(searcher_config, "max_trials", None, 1))]
    if name == "grid":
        return [TrialSummary(grid_size(hyperparameters))]
    if name != "adaptive_asha":
        raise SearcherError(f"cannot preview a {name} search: 0.38.1 previews single, random, "
                            "grid and adaptive_asha searches")
    asha = AshaSearcher(searcher_config, hyperparameters, 0)
    unit, _ = _time_budget(searcher_config)
    divisor = float(searcher_config.get("divisor", 4))
    stopped_at: dict[int, int] = {}
    for spec in asha.brackets:
        at_rung = spec.max_trials
        for i, units in enumerate(spec.rung_units):
            going_on = max(int(at_rung / divisor), 1)
            stopped = at_rung if i == len(spec.rung_units) - 1 else at_rung - going_on
            stopped_at[units] = stopped_at.get(units, 0) + stopped
            at_rung = going_on
    return [TrialSummary(stopped_at[u], unit, u) for u in sorted(stopped_at)]
