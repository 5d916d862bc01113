"""Which checkpoints a list shows and in what order (pure): Determined 0.38.1's
``GetExperimentCheckpoints`` / ``GetTrialCheckpoints`` semantics.

- ``states`` keeps only checkpoints in one of those states (none given: all of them).
- ``sortByAttr`` sorts by an attribute, ``sortByMetric`` by a validation metric's value at
  the checkpoint's step; neither: by trial id. Ties (and the trial-id and step sorts) fall
  back to the report time, earlier first; ``ORDER_BY_DESC`` reverses the whole comparison.
  A checkpoint lacking the sorted value (no validation at its step, no trial) sorts as the
  smallest.
- ``SORT_BY_SEARCHER_METRIC`` without an order means "best first" (ascending when the
  experiment's ``smaller_is_better``), and checkpoints without a searcher metric come last
  whatever the order: ``top_checkpoint()`` and ``det e download --top-n`` read the first.
  0.38.1 does this for an experiment's list only; its trial list leaves that sort ascending
  with the unvalidated first, which makes ``Trial.top_checkpoint()`` return the worst (or an
  unvalidated) checkpoint where larger is better. Both lists here do what the SDK documents.
- ``offset`` skips that many (negative: counts from the end), ``limit`` 0 means all; an
  offset outside the list is refused, as 0.38.1 refuses it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ...errors import InvalidRequest

#: ``checkpointv1SortBy``
SORT_BY = ("SORT_BY_UNSPECIFIED", "SORT_BY_UUID", "SORT_BY_TRIAL_ID", "SORT_BY_BATCH_NUMBER",
           "SORT_BY_END_TIME", "SORT_BY_STATE", "SORT_BY_SEARCHER_METRIC")
#: ``checkpointv1State``'s numbers (``SORT_BY_STATE`` orders by them)
STATE_NUMBERS = {"UNSPECIFIED": 0, "ACTIVE": 1, "COMPLETED": 2, "ERROR": 3, "DELETED": 4,
                 "PARTIALLY_DELETED": 5}
ASC, DESC = "ORDER_BY_ASC", "ORDER_BY_DESC"


@dataclass(frozen=True)
class ListedCheckpoint:
    """A stored checkpoint (``row``: uuid, trial_id, steps_completed, report_time, state, …)
    with the reports at its step: the training and validation metrics (None where there is
    no report) and the experiment's searcher metric in that validation."""

    row: Any
    training_metrics: dict | None = None
    validation_metrics: dict | None = None
    searcher_metric: float | None = None


@dataclass(frozen=True)
class CheckpointQuery:
    """What a list asks for; states without ``STATE_`` (``COMPLETED``)."""

    states: frozenset[str] = field(default_factory=frozenset)
    sort_attr: str | None = None
    sort_metric: str | None = None
    order: str | None = None
    offset: int = 0
    limit: int = 0

    def __post_init__(self) -> None:
        if self.sort_attr is not None and self.sort_metric is not None:
            raise InvalidRequest("give sortByAttr or sortByMetric, not both")
        if self.sort_attr is not None and self.sort_attr not in SORT_BY:
            raise InvalidRequest(f"sortByAttr must be one of {', '.join(SORT_BY)}, got {self.sort_attr!r}")
        if self.limit < 0:
            raise InvalidRequest(f"limit must be 0 (all) or more, got {self.limit}")


def metric_value(metrics: dict | None, name: str | None) -> float | None:
    """``metrics[name]`` as a float when it is a finite number, else None."""
    if not metrics or not name:
        return None
    value = metrics.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _present(value: float | None) -> tuple[bool, float]:
    """A sort key that puts a missing value below every present one."""
    return (value is not None, 0.0 if value is None else value)


def _key(query: CheckpointQuery) -> Callable[[ListedCheckpoint], tuple]:
    if query.sort_metric is not None:
        name = query.sort_metric
        return lambda c: (_present(metric_value(c.validation_metrics, name)), c.row.report_time)
    attr = query.sort_attr
    if attr == "SORT_BY_UUID":
        return lambda c: (c.row.uuid,)
    if attr == "SORT_BY_BATCH_NUMBER":
        return lambda c: (_present(c.row.steps_completed), c.row.report_time)
    if attr == "SORT_BY_END_TIME":
        return lambda c: (c.row.report_time,)
    if attr == "SORT_BY_STATE":
        return lambda c: (STATE_NUMBERS.get(c.row.state, 0), c.row.report_time)
    if attr == "SORT_BY_SEARCHER_METRIC":
        return lambda c: (_present(c.searcher_metric), c.row.report_time)
    return lambda c: (_present(c.row.trial_id), c.row.report_time)  # unspecified: by trial


def order_checkpoints(items: Iterable[ListedCheckpoint], query: CheckpointQuery, *,
                      smaller_is_better: bool = True) -> list[ListedCheckpoint]:
    """The checkpoints ``query`` keeps, in its order (see the module docstring)."""
    kept = [c for c in items if not query.states or c.row.state in query.states]
    order = query.order
    by_searcher = query.sort_metric is None and query.sort_attr == "SORT_BY_SEARCHER_METRIC"
    if by_searcher and order in (None, "ORDER_BY_UNSPECIFIED"):
        order = ASC if smaller_is_better else DESC
    key = _key(query)
    if by_searcher:  # the ones without a searcher metric last, in either order
        scored = sorted((c for c in kept if c.searcher_metric is not None), key=key, reverse=order == DESC)
        return scored + sorted((c for c in kept if c.searcher_metric is None), key=key)
    return sorted(kept, key=key, reverse=order == DESC)


def page_bounds(total: int, offset: int, limit: int) -> tuple[int, int]:
    """``[start, end)`` of the page: a negative ``offset`` counts from the end, ``limit`` 0 is
    everything after the start; InvalidRequest naming ``offset`` when it is out of bounds."""
    start = total + offset if offset < 0 else offset
    if not 0 <= start <= total:
        raise InvalidRequest(f"offset {offset} is out of bounds: the list has {total} item(s)")
    end = total if limit == 0 else min(start + limit, total)
    return start, end


def pagination(offset: int, limit: int, start: int, end: int, total: int) -> dict[str, int]:
    """A ``v1Pagination``."""
    return {"offset": offset, "limit": limit, "startIndex": start, "endIndex": end, "total": total}
