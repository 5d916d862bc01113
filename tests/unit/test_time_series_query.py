"""The time-series query (``services.metrics.timeseries``) and submission's pure helpers on
in-memory doubles: which read path a query takes, and that hidden trials are left out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from det_jupyter.errors import DetError
from det_jupyter.services.experiments.submission import merged_yaml, parsed_or_error
from det_jupyter.services.metrics.timeseries import SeriesQuery, TimeSeriesQuery


@pytest.mark.parametrize(("query", "one"), [
    (SeriesQuery([1], {"training": ["loss"]}), ("training", "loss")),
    (SeriesQuery(list(range(10)), {"validation": ["acc"]}), ("validation", "acc")),
    (SeriesQuery(list(range(11)), {"training": ["loss"]}), None),
    (SeriesQuery([1], {"training": ["loss", "acc"]}), None),
    (SeriesQuery([1], {"training": ["loss"], "validation": ["acc"]}), None),
    (SeriesQuery([1], {"training": ["loss"]}, max_points=100), None),
    (SeriesQuery([1], {"training": ["loss"]}, start=0), None),
    (SeriesQuery([1], {"training": ["loss"]}, end=5), None),
    (SeriesQuery([1], {}), None),
])
def test_whole_histories_of_one_metric_of_a_few_trials_are_read_with_the_trials(
        query: SeriesQuery, one: tuple[str, str] | None) -> None:
    assert query.whole_history_of_one() == one


@dataclass
class Row:
    id: int
    experiment_id: int
    summary: Any = None
    report_counts: Any = None


@dataclass
class View:
    row: Row


@dataclass
class FakeViews:
    rows: dict[int, Row]
    calls: list[str] = field(default_factory=list)

    def trials(self, *, trial_ids: list[int] | None = None, count: bool = True) -> tuple[list[Any], int]:
        self.calls.append("trials")
        return [View(self.rows[t]) for t in trial_ids or [] if t in self.rows], -1

    def trials_with_history(self, trial_ids: list[int], group: str, name: str) -> tuple[list[Any], dict[int, str]]:
        self.calls.append(f"history {group}.{name}")
        return self.trials(trial_ids=trial_ids, count=False)[0], {t: "[]" for t in trial_ids}


@dataclass
class FakeMetrics:
    asked: list[tuple] = field(default_factory=list)

    def series(self, trial_ids: list[int], group: str, names: list[str], **kw: Any) -> dict[int, str]:
        self.asked.append((trial_ids, group, names, kw["histories"] is not None))
        return {t: f'["{group}"]' for t in trial_ids}


class SeesExperiment:
    """A caller that may see only one experiment."""

    def __init__(self, experiment_id: int) -> None:
        self.experiment_id = experiment_id
        self.checked = False

    def mark_checked(self) -> None:
        self.checked = True

    def may_see_experiment(self, experiment_id: int) -> bool:
        return experiment_id == self.experiment_id


def test_hidden_trials_are_left_out_and_the_query_counts_as_checked() -> None:
    views = FakeViews({1: Row(1, 10), 2: Row(2, 20), 3: Row(3, 10)})
    metrics = FakeMetrics()
    caller = SeesExperiment(10)
    found = TimeSeriesQuery(views, metrics).query(caller, SeriesQuery([1, 2, 3, 4], {"training": ["loss"]},
                                                                      max_points=50))
    assert caller.checked
    assert [v.row.id for v in found.views] == [1, 3]
    assert found.by_group == {"training": {1: '["training"]', 3: '["training"]'}}
    assert views.calls == ["trials"]
    assert metrics.asked == [([1, 3], "training", ["loss"], False)]


def test_one_metric_of_one_trial_reads_its_history_with_the_trial() -> None:
    views = FakeViews({1: Row(1, 10)})
    metrics = FakeMetrics()
    TimeSeriesQuery(views, metrics).query(SeesExperiment(10), SeriesQuery([1], {"validation": ["acc"]}))
    assert views.calls == ["history validation.acc", "trials"]
    assert metrics.asked == [([1], "validation", ["acc"], True)]


def test_a_config_that_does_not_parse_is_returned_as_its_error() -> None:
    assert parsed_or_error("a: 1") == ({"a": 1}, None)
    raw, err = parsed_or_error("a: [")
    assert raw == {} and isinstance(err, DetError)


def test_the_template_is_merged_under_the_config() -> None:
    out = merged_yaml({"description": "t", "resources": {"slots_per_trial": 2}}, {"description": "c"})
    assert "description: c" in out and "slots_per_trial: 2" in out
