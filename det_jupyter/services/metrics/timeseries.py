"""The metrics time-series query (0.38.1's CompareTrials, ``GET /api/v1/trials/time-series``).

Chosen metrics of several trials, downsampled in the database to ``max_points`` per trial:
what charts need. The trials the caller may not see are left out as if absent (filtering is
the check), by experiment: the workspace lookup is cached and a chart's trials share a few.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..access.resolver import Caller


class _Views(Protocol):
    def trials(self, *, trial_ids: list[int] | None = ..., count: bool = ...) -> tuple[list[Any], int]: ...

    def trials_with_history(self, trial_ids: list[int], group: str, name: str,
                            ) -> tuple[list[Any], dict[int, str]]: ...


class _Series(Protocol):
    def series(self, trial_ids: list[int], group: str, names: list[str], *, max_points: int = ...,
               start: int | None = ..., end: int | None = ..., known: Any = ...,
               histories: dict[int, str] | None = ...) -> dict[int, str]: ...


@dataclass(frozen=True)
class SeriesQuery:
    """Which metrics (``{group: [name, …]}``) of which trials, and how many points of which
    steps (``start``/``end``: batches, inclusive; None: unbounded)."""

    trial_ids: list[int]
    wanted: dict[str, list[str]] = field(default_factory=dict)
    max_points: int = 0
    start: int | None = None
    end: int | None = None

    def whole_history_of_one(self) -> tuple[str, str] | None:
        """The one (group, name) asked for when the query is whole histories of one metric of
        a few trials (a trial's page), which are read with the trials in one round trip."""
        asked = [(g, name) for g, names in self.wanted.items() for name in names]
        if (len(asked) == 1 and len(self.trial_ids) <= 10 and not self.max_points
                and self.start is None and self.end is None):
            return asked[0]
        return None


@dataclass(frozen=True)
class TrialSeries:
    """The trials found (their views, in the order read) and, per group, each trial's points
    as JSON array text (``MetricService.series``)."""

    views: list[Any]
    by_group: dict[str, dict[int, str]]


class TimeSeriesQuery:
    """Answers the time-series query in one call."""

    def __init__(self, views: _Views, metrics: _Series) -> None:
        self._views = views
        self._metrics = metrics

    def query(self, caller: Caller, q: SeriesQuery) -> TrialSeries:
        """The series of the trials of ``q`` that ``caller`` may see (the verb's permission on
        their experiments); the others are left out as if they did not exist."""
        histories = None
        one = q.whole_history_of_one()
        if one is not None:
            views, histories = self._views.trials_with_history(q.trial_ids, *one)
        else:
            views, _ = self._views.trials(trial_ids=q.trial_ids, count=False)
        # Others' trials: as if absent. Filtering is the check, also when no trial is found.
        caller.mark_checked()
        views = [v for v in views if caller.may_see_experiment(v.row.experiment_id)]
        found = [v.row.id for v in views]
        # The views' rows (by id: every column) give what the stored series are checked against.
        known = [(v.row.id, v.row.summary, v.row.report_counts) for v in views]
        by_group = {
            g: self._metrics.series(found, g, names, max_points=q.max_points, known=known,
                                    start=q.start, end=q.end, histories=histories)
            for g, names in q.wanted.items()
        }
        return TrialSeries(views, by_group)
