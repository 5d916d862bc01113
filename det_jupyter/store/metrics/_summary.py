"""A trial's summary: per group, per metric, the last, lowest and highest finite value, their
count and the last step — kept on the trial row so the experiment table never scans the
metrics table. Pure functions over plain values."""

from __future__ import annotations

import math

from . import _columns as columns
from ._records import Report


def update_summary(summary: dict | None, reports: list[Report],
                   found: tuple[tuple[str, ...], list[tuple]] | None = None) -> dict:
    """Fold reports, in order, into a trial's summary: per group, per metric last/min/max/count
    of the finite numbers (``last``: the value at the highest step, a later report winning a
    tie). One copy of the touched groups per call, then in place: ingestion folds whole
    batches, and a fresh dict per value cost more than storing the rows. ``found``: the
    reports' ``_columns.uniform`` where the caller has it."""
    out = dict(summary or {})
    if reports:
        group = reports[0].group
        steps = [r.steps_completed for r in reports]
        if all(r.group == group for r in reports) and steps == sorted(steps):
            found = found if found is not None else columns.uniform(reports)
            if found is not None:  # one group's finite numbers in step order: by columns
                stats = {k: dict(v) for k, v in (out.get(group) or {}).items()}
                columns.fold(stats, *found, steps[-1])
                out[group] = stats
                return out
    fold_each(out, reports)
    return out


def fold_each(out: dict, reports: list[Report]) -> None:
    """``update_summary``'s fold, value by value, into ``out`` (a copy of the summary)."""
    touched: dict[str, dict] = {}
    for r in reports:
        stats = touched.get(r.group)
        if stats is None:
            stats = touched[r.group] = {k: dict(v) for k, v in (out.get(r.group) or {}).items()}
        step = r.steps_completed
        for name, value in r.metrics.items():
            if type(value) is not float:
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    continue
                value = float(value)
            if math.isfinite(value):
                columns.merge(stats, name, value, value, value, 1, step)
    out.update(touched)
