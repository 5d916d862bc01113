"""The metric store's API (``det_jupyter.store.metrics``) on each backend, without the service:
what ``append`` writes, what the reads give back, and that the stored series and the rows agree."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from det_jupyter.store import metrics as store
from det_jupyter.store import reader
from det_jupyter.store import tables as t
from det_jupyter.store.metrics import IngestTrial, Report

from ._rows import make_trial, make_world


def _training(step: int, loss: float, **extra: object) -> Report:
    return Report("training", step, {"loss": loss, **extra}, 1_764_000_000.5 + step)


def _append(engine: sa.Engine, trial_id: int, reports: list[Report], best: float | None = None) -> IngestTrial:
    """``append`` in a transaction of its own, on the trial as ``read_trial`` gives it then."""
    with engine.begin() as conn:
        trial = store.read_trial(conn, trial_id)
        assert trial is not None
        store.append(conn, trial, reports, best)
    return trial


def _trial(engine: sa.Engine, trial_id: int) -> IngestTrial:
    with engine.connect() as conn:
        trial = store.read_trial(conn, trial_id)
    assert trial is not None
    return trial


def test_read_trial_gives_the_row_ingestion_moves_on_and_none_for_no_trial(engine: sa.Engine) -> None:
    _, exp_id, tid = make_world(engine)
    trial = _trial(engine, tid)
    assert (trial.id, trial.run_id, trial.experiment_id, trial.state) == (tid, 1, exp_id, "ACTIVE")
    assert (trial.summary, trial.total_batches, trial.best_validation, trial.report_counts) == (None, 0, None, None)
    assert trial.config["searcher"]["metric"] == "loss" and isinstance(trial.request_id, str)
    with engine.connect() as conn:
        assert store.read_trial(conn, 999_999) is None


def test_append_stores_the_rows_and_moves_the_trial_on(engine: sa.Engine) -> None:
    _, _, tid = make_world(engine)
    _append(engine, tid, [_training(1, 0.9), _training(2, 0.5, acc=0.7),
                          Report("validation", 2, {"loss": 0.6}, 5.0)], best=0.6)
    _append(engine, tid, [_training(4, 0.7)])
    trial = _trial(engine, tid)
    assert trial.total_batches == 4 and trial.report_counts == {"training": 3, "validation": 1}
    assert trial.best_validation is None  # the caller's to decide, each time
    loss = trial.summary["training"]["loss"]
    assert (loss["last"], loss["min"], loss["max"], loss["count"], loss["lastStep"]) == (0.7, 0.5, 0.9, 3, 4)
    with engine.connect() as conn:
        history = store.history(conn, tid)
        assert [(h["group"], h["steps_completed"]) for h in history] == [
            ("training", 1), ("training", 2), ("validation", 2), ("training", 4)]
        assert history[1]["metrics"] == {"loss": 0.5, "acc": 0.7} and history[1]["trial_run_id"] == 1
        assert history[1]["report_time"] == 1_764_000_002.5
        assert [h["steps_completed"] for h in store.history(conn, tid, "training", offset=1, limit=1)] == [2]
        assert store.count(conn, tid) == 4 and store.count(conn, tid, ("validation",)) == 1
        assert store.known_steps(conn, tid, 2, 3) == {("training", 2), ("validation", 2)}
        rows = conn.execute(sa.select(t.metrics.c.steps_completed, t.metrics.c.lod, t.metrics.c.time_text)
                            .where(t.metrics.c.trial_id == tid, t.metrics.c.mgroup == "training")
                            .order_by(t.metrics.c.steps_completed)).all()
    # Ordinals 1, 2, 3 in the group: chart levels 0, 1, 0.
    assert [(s, lod) for s, lod, _ in rows] == [(1, 0), (2, 1), (4, 0)]
    assert rows[0][2] == store.time_text(1_764_000_001.5) == "2025-11-24T16:00:01.500Z"


def test_non_finite_values_are_stored_as_the_rest_api_spells_them(engine: sa.Engine) -> None:
    _, _, tid = make_world(engine)
    _append(engine, tid, [_training(1, float("nan"), up=float("inf"), down=float("-inf"), label="a")])
    with engine.connect() as conn:
        (report,) = store.history(conn, tid)
    assert report["metrics"] == {"loss": "NaN", "up": "Infinity", "down": "-Infinity", "label": "a"}
    assert "loss" not in (_trial(engine, tid).summary or {}).get("training", {})


def test_chart_answers_every_trial_and_the_stored_series_agree_with_the_rows(engine: sa.Engine) -> None:
    _, exp_id, tid = make_world(engine)
    empty = make_trial(engine, exp_id)
    _append(engine, tid, [_training(s, 1.0 / s, acc=s / 7) for s in range(1, 101)])
    with reader(engine).connect() as conn:
        from_rows = store.chart(conn, [tid, empty], "training", ["loss"])
        from_series = store.chart(conn, [tid, empty], "training", ["loss"], stored_first=True)
        stored = store.read_series(conn, [tid, empty], "training", "loss", 0)
        both = store.chart(conn, [tid], "training", ["loss", "acc"], max_points=10, start=20)
    assert from_rows == from_series and from_rows[empty] == "[]"
    assert stored == {tid: from_rows[tid]}  # a trial without reports has no stored series
    points = json.loads(from_rows[tid])
    assert [p["batches"] for p in points] == list(range(1, 101))
    assert points[0] == {"batches": 1, "time": "2025-11-24T16:00:01.500Z", "values": {"loss": 1.0}}
    zoomed = json.loads(both[tid])
    assert len(zoomed) <= 10 and zoomed[0]["batches"] >= 20 and zoomed[-1]["batches"] == 100
    assert set(zoomed[-1]["values"]) == {"loss", "acc"}


@pytest.mark.parametrize("max_points", [30, 0])
def test_sampled_and_whole_stored_series_equal_the_rows(engine: sa.Engine, max_points: int) -> None:
    _, _, tid = make_world(engine)
    for lo in range(1, 300, 41):  # batches across block boundaries
        _append(engine, tid, [_training(s, 1.0 / s) for s in range(lo, min(lo + 41, 300))])
    with reader(engine).connect() as conn:
        stored = store.read_series(conn, [tid], "training", "loss", max_points)
        rows = store.chart(conn, [tid], "training", ["loss"], max_points=max_points)
    assert stored == rows


def test_a_summary_rebuilt_from_the_visible_reports(engine: sa.Engine) -> None:
    _, _, tid = make_world(engine)
    _append(engine, tid, [_training(s, float(s)) for s in (1, 2, 3)])
    with engine.begin() as conn:  # what a rewind to a checkpoint at step 1 does
        conn.execute(sa.update(t.metrics).where(t.metrics.c.trial_id == tid, t.metrics.c.steps_completed > 1)
                     .values(archived=True))
        reports = store.visible_reports(conn, tid)
        assert reports == [Report("training", 1, {"loss": 1.0}, 0.0)]
        store.write_summary(conn, tid, store.update_summary(None, reports), 0.25)
        assert store.known_steps(conn, tid, 0, 10) == {("training", 1)}
    trial = _trial(engine, tid)
    assert trial.summary == {"training": {"loss": {"last": 1.0, "min": 1.0, "max": 1.0, "count": 1, "lastStep": 1}}}
    assert trial.best_validation == 0.25
