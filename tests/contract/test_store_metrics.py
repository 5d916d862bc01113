"""MetricService on each backend: storage, idempotent retries, summaries, staleness, archiving."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from det_jupyter.errors import Conflict, NotFound
from det_jupyter.services.common.clock import FakeClock
from det_jupyter.services.experiments.views import Views
from det_jupyter.services.metrics.service import MetricService, Report
from det_jupyter.store import tables as t

from ._rows import make_world


def training(step: int, loss: float, **extra: float) -> Report:
    return Report("training", step, {"loss": loss, **extra}, 1_800_000_000.0 + step)


def validation(step: int, loss: float) -> Report:
    return Report("validation", step, {"loss": loss}, 1_800_000_000.0 + step)


@pytest.fixture
def metrics(engine: sa.Engine, clock: FakeClock) -> MetricService:
    return MetricService(engine, clock)


@pytest.fixture
def trial_id(engine: sa.Engine) -> int:
    return make_world(engine)[2]


def _trial_row(engine: sa.Engine, trial_id: int) -> sa.Row:
    view = Views(engine).trial(trial_id)
    assert view is not None
    return view.row


def _steps(history: list[dict]) -> list[tuple[str, int]]:
    return [(h["group"], h["steps_completed"]) for h in history]


def test_reports_come_back_in_step_order(metrics: MetricService, trial_id: int) -> None:
    metrics.ingest(trial_id, 1, [training(30, 0.3), training(10, 0.9)])
    metrics.ingest(trial_id, 1, [training(20, 0.5, acc=0.7)])
    history = metrics.history(trial_id)
    assert _steps(history) == [("training", 10), ("training", 20), ("training", 30)]
    assert history[1]["metrics"] == {"loss": 0.5, "acc": 0.7}
    assert history[1]["report_time"] == 1_800_000_020.0
    assert metrics.count(trial_id) == 3


def test_history_filters_by_group_and_pages(metrics: MetricService, trial_id: int) -> None:
    metrics.ingest(trial_id, 1, [training(s, 1.0 / s) for s in range(1, 6)] + [validation(5, 0.2)])
    assert _steps(metrics.history(trial_id, "validation")) == [("validation", 5)]
    assert [h["steps_completed"] for h in metrics.history(trial_id, "training", offset=1, limit=2)] == [2, 3]
    assert metrics.count(trial_id, "training") == 5


def test_retried_batch_is_stored_once(metrics: MetricService, engine: sa.Engine, trial_id: int) -> None:
    batch = [training(1, 0.9), training(2, 0.8), validation(2, 0.85)]
    assert metrics.ingest(trial_id, 1, batch).validations == [validation(2, 0.85)]
    assert metrics.ingest(trial_id, 1, batch).validations == []  # a retry after a lost reply
    assert _steps(metrics.history(trial_id)) == [("training", 1), ("training", 2), ("validation", 2)]
    summary = _trial_row(engine, trial_id).summary
    assert summary["training"]["loss"]["count"] == 2


def test_duplicate_within_one_batch_is_stored_once(metrics: MetricService, trial_id: int) -> None:
    metrics.ingest(trial_id, 1, [training(1, 0.9), training(1, 0.9), training(2, 0.8)])
    assert _steps(metrics.history(trial_id)) == [("training", 1), ("training", 2)]


def test_same_step_in_another_group_is_not_a_duplicate(metrics: MetricService, trial_id: int) -> None:
    metrics.ingest(trial_id, 1, [training(4, 0.4)])
    assert metrics.ingest(trial_id, 1, [validation(4, 0.5)]).validations == [validation(4, 0.5)]
    assert metrics.count(trial_id) == 2


def test_only_new_validation_reports_are_returned(metrics: MetricService, trial_id: int) -> None:
    first = metrics.ingest(trial_id, 1, [training(1, 0.9), validation(1, 0.7)]).validations
    assert [(r.group, r.steps_completed, r.metrics) for r in first] == [("validation", 1, {"loss": 0.7})]
    assert metrics.ingest(trial_id, 1, [training(2, 0.6)]).validations == []


def test_summary_tracks_last_min_max_count(metrics: MetricService, engine: sa.Engine, trial_id: int) -> None:
    metrics.ingest(trial_id, 1, [training(2, 0.5), training(3, 0.7)])
    metrics.ingest(trial_id, 1, [training(1, 0.2)])  # late arrival of an older step
    row = _trial_row(engine, trial_id)
    loss = row.summary["training"]["loss"]
    assert (loss["last"], loss["min"], loss["max"], loss["count"]) == (0.7, 0.2, 0.7, 3)
    assert row.total_batches == 3


def test_summary_skips_values_that_are_not_finite_numbers(
    metrics: MetricService, engine: sa.Engine, trial_id: int
) -> None:
    report = Report("training", 1, {"loss": 0.5, "nan": float("nan"), "name": "x", "flag": True}, 1.0)
    metrics.ingest(trial_id, 1, [report])
    assert set(_trial_row(engine, trial_id).summary["training"]) == {"loss"}


@pytest.mark.parametrize(
    ("smaller_is_better", "expected"), [(True, 0.3), (False, 0.9)], ids=["smaller", "larger"]
)
def test_best_validation_follows_the_searcher(
    metrics: MetricService, engine: sa.Engine, smaller_is_better: bool, expected: float
) -> None:
    trial_id = make_world(engine, smaller_is_better=smaller_is_better)[2]
    metrics.ingest(trial_id, 1, [validation(1, 0.5), validation(2, 0.9)])
    metrics.ingest(trial_id, 1, [validation(3, 0.3), training(3, 0.01)])  # training never counts
    assert _trial_row(engine, trial_id).best_validation == expected


def test_stale_run_is_a_conflict_and_stores_nothing(
    metrics: MetricService, engine: sa.Engine, trial_id: int
) -> None:
    with engine.begin() as conn:
        conn.execute(sa.update(t.trials).where(t.trials.c.id == trial_id).values(run_id=2))
    with pytest.raises(Conflict, match="stale"):
        metrics.ingest(trial_id, 1, [training(1, 0.5)])
    assert metrics.history(trial_id) == []
    metrics.ingest(trial_id, 2, [training(1, 0.5)])
    assert [h["trial_run_id"] for h in metrics.history(trial_id)] == [2]


def test_unknown_trial_is_not_found(metrics: MetricService) -> None:
    with pytest.raises(NotFound):
        metrics.ingest(999_999, 1, [training(1, 0.5)])


def test_archived_rows_are_hidden_and_can_be_reported_again(
    metrics: MetricService, engine: sa.Engine, trial_id: int
) -> None:
    metrics.ingest(trial_id, 1, [training(s, float(s)) for s in (1, 2, 3)])
    with engine.begin() as conn:  # what a rewind to a checkpoint at step 1 does
        conn.execute(
            sa.update(t.metrics)
            .where(t.metrics.c.trial_id == trial_id, t.metrics.c.steps_completed > 1)
            .values(archived=True)
        )
    assert _steps(metrics.history(trial_id)) == [("training", 1)]
    assert metrics.count(trial_id) == 1

    metrics.ingest(trial_id, 1, [training(2, 20.0), training(3, 30.0)])
    history = metrics.history(trial_id)
    assert [(h["steps_completed"], h["metrics"]["loss"]) for h in history] == [(1, 1.0), (2, 20.0), (3, 30.0)]


def test_ten_thousand_reports_in_one_call(metrics: MetricService, engine: sa.Engine, trial_id: int) -> None:
    batch = [training(s, 1.0 / s) for s in range(1, 10_001)]
    assert metrics.ingest(trial_id, 1, batch).validations == []
    assert metrics.count(trial_id) == 10_000
    assert metrics.ingest(trial_id, 1, batch).validations == []  # the whole batch retried: still once
    assert metrics.count(trial_id) == 10_000
    history = metrics.history(trial_id, "training")
    assert [h["steps_completed"] for h in history] == list(range(1, 10_001))
    loss = _trial_row(engine, trial_id).summary["training"]["loss"]
    assert (loss["count"], loss["last"], loss["max"]) == (10_000, 1.0 / 10_000, 1.0)
