"""Reports as columns: the fast path of ingestion's per-metric work (a trial's summary, its
stored series) for a batch where every report holds the same metrics, each a finite number —
what a training loop sends. The per-value path walks every value in Python; this one takes
each metric's values as a column and lets ``min``, ``max``, ``sum`` and ``str.join`` walk them.

Pure functions over plain values; ``_summary.update_summary`` and ``_series.append``
fall back to their per-value paths where ``uniform`` says no.
"""

from __future__ import annotations

import json
import math
from typing import Any

_NUMBERS = frozenset((float, int))  # bool is a type of its own: not a metric value here


def uniform(reports: list[Any]) -> tuple[tuple[str, ...], list[tuple]] | None:
    """The metric names of ``reports`` (objects with ``metrics`` dicts) and each name's values
    in the reports' order, where every report holds the same names in the same order and every
    value is a finite int or float; None otherwise (and for no reports or no metrics)."""
    if not reports:
        return None
    names = tuple(reports[0].metrics)
    if not names or any(tuple(r.metrics) != names for r in reports):
        return None
    columns = list(zip(*[tuple(r.metrics.values()) for r in reports], strict=True))
    for column in columns:
        if not _NUMBERS.issuperset(map(type, column)):
            return None
        try:
            if not math.isfinite(sum(column)):  # a NaN or an infinity (or a sum past the floats)
                return None
        except OverflowError:  # an int beyond the floats
            return None
    return names, columns


def fold(stats: dict[str, dict], names: tuple[str, ...], columns: list[tuple], last_step: int) -> None:
    """Fold ``uniform`` columns of reports in step order (``last_step``: the last one's) into
    one group's summary ``stats`` ({name: {last, min, max, count, lastStep}}), in place: what
    folding them one by one gives (``last``: the value at the highest step, a later report
    winning a tie)."""
    for name, column in zip(names, columns, strict=True):
        merge(stats, name, float(column[-1]), float(min(column)), float(max(column)), len(column), last_step)


def merge(stats: dict[str, dict], name: str, last: float, low: float, high: float, count: int, step: int) -> None:
    """Fold ``count`` values of metric ``name`` (their lowest and highest; ``last``: the one at
    ``step``, the highest of theirs) into ``stats``, in place."""
    s = stats.get(name)
    if s is None:
        stats[name] = {"last": last, "min": low, "max": high, "count": count, "lastStep": step}
        return
    if step >= s.get("lastStep", -1):
        s["last"] = last
        s["lastStep"] = step
    if low < s["min"]:
        s["min"] = low
    if high > s["max"]:
        s["max"] = high
    s["count"] += count


def encoded(names: tuple[str, ...], columns: list[tuple]) -> list[str]:
    """Each report's metrics of ``uniform`` columns as the compact JSON ingestion stores (what
    ``json`` writes with separators ``,`` and ``:``: a name escaped as ``json.dumps`` does, a
    finite float or an int as its ``repr``), by one template instead of an encoder call each."""
    template = "{" + ",".join(json.dumps(name).replace("%", "%%") + ":%r" for name in names) + "}"
    return [template % values for values in zip(*columns, strict=True)]
