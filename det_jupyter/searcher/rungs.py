"""Which trials of an ``adaptive_asha`` search reached which rung, from what they reported.

A read-side summary (the experiment page's and the notebook widget's "ASHA rungs" table), not
the searcher's own state: it is recomputed from the config and the trials' validations, so it
also answers for experiments whose searcher state is gone. Pure: plain values in and out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._brackets import max_rungs, rung_units

#: Trial states (with or without the ``STATE_`` prefix) after which a trial reports no more.
TERMINAL = frozenset({"COMPLETED", "CANCELED", "ERROR", "DELETED"})


def asha_units(searcher: Mapping[str, Any]) -> tuple[list[int], str | None]:
    """The rungs' time-metric thresholds of an ``adaptive_asha`` searcher (its deepest
    bracket's; shallower brackets use a suffix of them), and the time metric (``None``:
    ``steps_completed``, the legacy ``max_length``)."""
    divisor = float(searcher.get("divisor") or 4)
    metric: str | None
    if searcher.get("max_time") is not None:
        max_time, metric = int(searcher["max_time"]), searcher.get("time_metric")
    else:
        length = searcher.get("max_length") or {}
        max_time = int(next(iter(length.values()))) if isinstance(length, dict) and length \
            else int(length or 0)
        metric = None
    if max_time < 1:
        return [], None
    rungs = max_rungs(int(searcher.get("max_rungs") or 5), max_time,
                      int(searcher.get("max_trials") or 1), divisor)
    return rung_units(max(rungs, 1), divisor, max_time), metric


def asha_rungs(searcher: Mapping[str, Any], trials: Iterable[Mapping[str, Any]],
               validations: Mapping[int, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Which trials reached which ASHA rung, and where the stopped ones stopped.

    ``searcher``: the experiment config's ``searcher`` section; ``trials``: ``{"id", "state"}``
    dicts (``v1Trial``s do); ``validations``: ``{trial_id: [{"steps_completed", "metrics"}…]}``.
    A trial's progress is the largest ``time_metric`` value it validated (``steps_completed``
    for ``max_length``). Returns one dict per rung: ``{"rung", "units", "reached": [ids],
    "stopped": [ids], "running": [ids], "best": value}`` where *stopped* trials ended (any
    terminal state) with this as their highest rung and *running* ones are still going with
    it; *best* is the best searcher metric among the first reports at or past the rung.
    Other searchers: ``[]``.
    """
    if searcher.get("name") != "adaptive_asha":
        return []
    units, time_metric = asha_units(searcher)
    if not units:
        return []
    metric = searcher.get("metric")
    smaller = bool(searcher.get("smaller_is_better", True))
    rungs: list[dict[str, Any]] = [
        {"rung": i, "units": u, "reached": [], "stopped": [], "running": [], "best": None}
        for i, u in enumerate(units)]
    for t in sorted(trials, key=lambda t: int(t["id"])):
        tid = int(t["id"])
        top = -1
        for report in validations.get(tid) or ():
            ms = report.get("metrics") or {}
            progress = ms.get(time_metric) if time_metric else report.get("steps_completed")
            if not isinstance(progress, (int, float)):
                continue
            for rung in rungs:
                if progress < rung["units"]:
                    continue
                top = max(top, rung["rung"])
                if tid in rung["reached"]:
                    continue
                rung["reached"].append(tid)
                value = ms.get(metric)
                if isinstance(value, (int, float)) and (
                        rung["best"] is None or (value < rung["best"] if smaller else value > rung["best"])):
                    rung["best"] = value
        if top < 0:
            continue
        if str(t.get("state") or "").removeprefix("STATE_") in TERMINAL:
            if top < len(rungs) - 1:
                rungs[top]["stopped"].append(tid)
        else:
            rungs[top]["running"].append(tid)
    return rungs
