"""Metric time series for charts: chosen metrics, several trials, downsampled in SQL."""

from __future__ import annotations

import json
import math

import pytest
import sqlalchemy as sa

from det_jupyter.services.common.clock import FakeClock
from det_jupyter.services.metrics.service import MetricService, Report

from ._rows import make_trial, make_world


@pytest.fixture
def metrics(engine: sa.Engine, clock: FakeClock) -> MetricService:
    return MetricService(engine, clock)


def _series(metrics: MetricService, *args, **kwargs) -> dict[int, list[tuple]]:
    """series() as (step, time, values) tuples, from the JSON text it returns."""
    out = {}
    for tid, text in metrics.series(*args, **kwargs).items():
        out[tid] = [(p["batches"], p["time"], p["values"]) for p in json.loads(text)]
    return out


def _load(metrics: MetricService, trial_id: int, n: int, scale: float = 1.0) -> None:
    metrics.ingest(trial_id, 1, [
        Report("training", step, {"loss": scale / step, "batches": step, "odd name\"x": 2.5, "label": "a"}, 100.0 + step)
        for step in range(1, n + 1)
    ] + [Report("validation", 10, {"loss": 0.5}, 200.0)])


def test_full_series_of_chosen_metrics(engine: sa.Engine, metrics: MetricService) -> None:
    _, exp_id, tid = make_world(engine)
    _load(metrics, tid, 20)
    for names in (["loss", "batches", "missing"], ["loss", "batches", 'odd name"x', "missing"]):
        rows = _series(metrics, [tid], "training", names)[tid]
        assert [r[0] for r in rows] == list(range(1, 21))
        step, t, values = rows[4]
        assert step == 5 and t == "1970-01-01T00:01:45.000Z"
        assert values == {"loss": pytest.approx(0.2), "batches": 5,
                          **({'odd name"x': 2.5} if len(names) == 4 else {})}
        assert isinstance(values["batches"], int)
    assert _series(metrics, [tid], "validation", ["loss"])[tid] == [(10, "1970-01-01T00:03:20.000Z", {"loss": 0.5})]


def test_non_finite_values_stay_queryable(engine: sa.Engine, metrics: MetricService) -> None:
    """NaN is not JSON: stored as Determined spells it ("NaN"), the JSON queries still work."""
    _, _, tid = make_world(engine)
    metrics.ingest(tid, 1, [Report("training", 1, {"loss": math.nan, "up": math.inf, "ok": 1.0}, 100.0),
                            Report("training", 2, {"loss": 0.5, "nested": {"x": -math.inf}}, 101.0)])
    rows = _series(metrics, [tid], "training", ["loss", "up", "ok"])[tid]
    assert [r[2] for r in rows] == [{"loss": "NaN", "up": "Infinity", "ok": 1.0}, {"loss": 0.5}]
    assert metrics.history(tid)[1]["metrics"] == {"loss": 0.5, "nested": {"x": "-Infinity"}}


@pytest.mark.parametrize("max_points", [1, 2, 7, 50, 200])
def test_downsampling_keeps_at_most_max_points_with_the_ends(engine: sa.Engine, metrics: MetricService,
                                                              max_points: int) -> None:
    _, exp_id, first = make_world(engine)
    second = make_trial(engine, exp_id)
    _load(metrics, first, 100)
    _load(metrics, second, 3, scale=2.0)
    out = _series(metrics, [first, second], "training", ["loss"], max_points=max_points)
    steps = [r[0] for r in out[first]]
    assert len(steps) <= max_points
    assert steps[-1] == 100
    if max_points > 1:
        assert steps[0] == 1
        assert len(steps) >= min(100, max_points) // 2
    assert steps == sorted(set(steps))  # each report once, the ends included
    assert len(out[second]) == min(3, max_points)
    zoomed = [r[0] for r in _series(metrics, [first], "training", ["loss"], max_points=max_points,
                                    start=11, end=80)[first]]
    assert len(zoomed) <= max_points and zoomed == sorted(set(zoomed)) and zoomed[-1] == 79
    quoted = _series(metrics, [first], "training", ['lo"ss', "loss"], max_points=max_points)[first]
    assert [r[0] for r in quoted] == steps  # points built in Python: the same rows


def test_points_beyond_the_budget_are_thinned_evenly(engine: sa.Engine, metrics: MetricService,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The safety net when a level holds more rows than asked for (uneven ordinals after a
    rewind): forced here by a level that keeps every row."""
    from det_jupyter.store.metrics import _charts as charts

    _, _, tid = make_world(engine)
    _load(metrics, tid, 40)
    monkeypatch.setattr(charts, "level", lambda count, max_points: 0)
    steps = [r[0] for r in _series(metrics, [tid], "training", ["loss"], max_points=10)[tid]]
    assert len(steps) == 10 and steps[0] == 1 and steps[-1] == 40 and steps == sorted(set(steps))


def test_step_window_and_archived_rows(engine: sa.Engine, metrics: MetricService) -> None:
    from det_jupyter.store import tables as t

    _, _, tid = make_world(engine)
    _load(metrics, tid, 30)
    with engine.begin() as conn:
        conn.execute(sa.update(t.metrics).where(t.metrics.c.steps_completed > 25).values(archived=True))
    steps = [r[0] for r in _series(metrics, [tid], "training", ["loss"], start=10, end=28)[tid]]
    assert steps == list(range(10, 26))


def test_downsampling_follows_reports_not_step_numbers(engine: sa.Engine, metrics: MetricService) -> None:
    """Validations every 100 steps: the chart keeps every 2**L-th report whatever the spacing."""
    _, _, tid = make_world(engine)
    metrics.ingest(tid, 1, [Report("validation", 100 * k, {"loss": 1.0 / k}, 100.0 + k) for k in range(1, 1001)])
    steps = [r[0] for r in _series(metrics, [tid], "validation", ["loss"], max_points=200)[tid]]
    assert 100 <= len(steps) <= 200
    assert steps[0] == 100 and steps[-1] == 100_000 and steps == sorted(set(steps))
    gaps = {b - a for a, b in zip(steps[1:-2], steps[2:-1])}  # noqa: B905
    assert len(gaps) == 1, f"points are not evenly spaced: {sorted(gaps)[:5]}"


def test_chart_levels_are_rebuilt_for_a_database_made_before_them(engine: sa.Engine,
                                                                   metrics: MetricService) -> None:
    """Migration 2 on a database without metrics.lod: the levels and counts ingestion would
    have written, from the stored rows."""
    from det_jupyter.store import migrate
    from det_jupyter.store import tables as t

    _, exp_id, first = make_world(engine)
    second = make_trial(engine, exp_id)
    _load(metrics, first, 40)
    _load(metrics, second, 9)
    with engine.connect() as conn:
        written = conn.execute(sa.select(t.metrics.c.id, t.metrics.c.lod).order_by(t.metrics.c.id)).all()
        counts = dict(conn.execute(sa.select(t.trials.c.id, t.trials.c.report_counts)).all())
    assert counts[first] == {"training": 40, "validation": 1}
    assert {lod for _, lod in written} >= {0, 1, 2, 3, 4, 5}
    with engine.begin() as conn:  # back to the schema before migration 2
        conn.execute(sa.text("DROP INDEX ix_metrics_chart"))
        conn.execute(sa.text("ALTER TABLE metrics DROP COLUMN lod"))
        conn.execute(sa.text("ALTER TABLE trials DROP COLUMN report_counts"))
        conn.execute(sa.delete(t.schema_version).where(t.schema_version.c.version >= 2))
    assert migrate(engine) >= 2
    with engine.connect() as conn:
        assert conn.execute(sa.select(t.metrics.c.id, t.metrics.c.lod).order_by(t.metrics.c.id)).all() == written
        assert dict(conn.execute(sa.select(t.trials.c.id, t.trials.c.report_counts)).all()) == counts
    steps = [r[0] for r in _series(metrics, [first], "training", ["loss"], max_points=10)[first]]
    assert steps == [1, 8, 16, 24, 32, 40]
