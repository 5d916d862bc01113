"""An experiment's trial list as Determined 0.38.1 serves it (``GetExperimentTrials``): the
order ``sortBy`` names, the page ``offset``/``limit`` select, and each trial's best and latest
validation.

- Every sort breaks ties by trial id in the same direction (``ORDER BY <key> ASC, id ASC``);
  a missing value (no end time, no validation yet) sorts as the largest, as PostgreSQL sorts
  NULL: last ascending, first descending.
- The validation metrics sort by the searcher metric signed so that smaller is better
  (``smaller_is_better: false`` negates it), so ascending is always best first.
- A trial's best validation is its validation report with the best searcher metric (the
  earlier report on a tie); its latest, the last validation report that has the metric.
- ``offset`` counts from the end when negative; one past either end gives an empty page, not
  an error; ``limit`` 0 is everything after the offset.

The sorts the trial row answers are ordered in SQL (``store.views.of_experiment_sorted``);
those in ``SORTED_IN_PYTHON`` here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: ``v1GetExperimentTrialsRequestSortBy``
SORT_BY = ("SORT_BY_UNSPECIFIED", "SORT_BY_ID", "SORT_BY_START_TIME", "SORT_BY_END_TIME", "SORT_BY_STATE",
           "SORT_BY_BEST_VALIDATION_METRIC", "SORT_BY_LATEST_VALIDATION_METRIC", "SORT_BY_BATCHES_PROCESSED",
           "SORT_BY_DURATION", "SORT_BY_RESTARTS", "SORT_BY_CHECKPOINT_SIZE", "SORT_BY_LOG_RETENTION_DAYS")
#: The sorts by a value the trial row does not hold: the list is sorted after it is read.
SORTED_IN_PYTHON = frozenset({"SORT_BY_LATEST_VALIDATION_METRIC", "SORT_BY_CHECKPOINT_SIZE"})


@dataclass(frozen=True)
class ValidationReport:
    """One validation report of a trial (``id``: its place in report order)."""

    id: int
    steps_completed: int
    report_time: float
    metrics: dict


@dataclass(frozen=True)
class TrialValidations:
    """A trial's best and latest validation reports by the searcher metric."""

    best: ValidationReport | None = None
    latest: ValidationReport | None = None


def signed(metrics: dict, metric: str | None, smaller_is_better: bool) -> float | None:
    """The report's searcher metric, negated when larger is better; None when it has none."""
    value = metrics.get(metric) if metric else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value) if smaller_is_better else -float(value)


def summarize(reports: Iterable[tuple[int, ValidationReport]], metric: str | None,
              smaller_is_better: bool) -> dict[int, TrialValidations]:
    """Each trial's best and latest validation among ``(trial_id, report)`` pairs."""
    best: dict[int, tuple[float, int, ValidationReport]] = {}
    latest: dict[int, ValidationReport] = {}
    for trial_id, report in reports:
        value = signed(report.metrics, metric, smaller_is_better)
        if value is None:
            continue
        known = best.get(trial_id)
        if known is None or (value, report.id) < known[:2]:
            best[trial_id] = (value, report.id, report)
        if trial_id not in latest or report.id > latest[trial_id].id:
            latest[trial_id] = report
    return {tid: TrialValidations(best[tid][2], latest.get(tid)) for tid in best}


def page_bounds(total: int, offset: int, limit: int) -> tuple[int, int]:
    """``[start, end)`` of the page (0.38.1's ``page_info``, with ``limit`` 0 meaning all)."""
    if offset < -total or offset > total:
        start = total
    else:
        start = total + offset if offset < 0 else offset
    end = total if limit == 0 else min(start + limit, total)
    return start, end


def sort_in_python(rows: list[Any], values: dict[int, float | None], descending: bool) -> list[Any]:
    """Trial rows sorted by ``values`` (by trial id; a missing value sorts largest), ties by id."""
    def key(row: Any) -> tuple:
        value = values.get(row.id)
        return (value is None, 0.0 if value is None else value, row.id)

    return sorted(rows, key=key, reverse=descending)


def latest_values(validations: dict[int, TrialValidations], metric: str | None,
                  smaller_is_better: bool) -> dict[int, float | None]:
    """Each trial's latest validation's signed searcher metric (``SORT_BY_LATEST_VALIDATION_METRIC``)."""
    return {tid: signed(v.latest.metrics, metric, smaller_is_better) if v.latest else None
            for tid, v in validations.items()}
