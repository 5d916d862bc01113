"""Stored series (``metric_series``): a whole history of one metric is answered from the points
encoded at ingestion exactly when that gives what the rows give, and from the rows otherwise."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from det_jupyter.services.common.clock import FakeClock
from det_jupyter.services.metrics.service import MetricService, Report
from det_jupyter.store import tables as t
from det_jupyter.store.metrics import _charts as charts
from det_jupyter.store.metrics import _series as stored

from ._rows import make_world

# Values whose JSON text a database might respell: exponents, the extremes, negative zero, ints.
ODD = [1e-05, 1e16, 1.5e300, -0.0, 5e-324, 1.7976931348623157e308, 0.1, 1 / 3, 7, -12, 2**53 + 1, 123456789.125]


@pytest.fixture
def metrics(engine: sa.Engine, clock: FakeClock) -> MetricService:
    return MetricService(engine, clock)


def _reports(group: str, steps: range, **extra: object) -> list[Report]:
    return [Report(group, s, {"loss": ODD[s % len(ODD)], "acc": s / 7, **extra}, 1_764_000_000.5 + s) for s in steps]


def _from_rows(engine: sa.Engine, metrics: MetricService, trial_id: int, group: str, name: str,
               max_points: int = 0) -> str:
    """The answer built from the rows: the same call with the trial's stored series gone."""
    with engine.begin() as conn:
        saved = conn.execute(sa.select(t.metric_series).where(t.metric_series.c.trial_id == trial_id)).all()
        conn.execute(sa.delete(t.metric_series).where(t.metric_series.c.trial_id == trial_id))
    try:
        return metrics.series([trial_id], group, [name], max_points=max_points)[trial_id]
    finally:
        with engine.begin() as conn:
            if saved:
                conn.execute(sa.insert(t.metric_series), [r._asdict() for r in saved])


def _stored(engine: sa.Engine, trial_id: int, group: str, name: str, max_points: int = 0) -> dict[int, str]:
    with engine.connect() as conn:
        return stored.read(conn, [trial_id], group, name, max_points)


def test_a_whole_history_comes_from_the_stored_series_and_equals_the_rows(
    engine: sa.Engine, metrics: MetricService
) -> None:
    _, _, tid = make_world(engine)
    # Batches of odd sizes across block boundaries, a validation group beside the training one.
    for lo, hi in ((1, 7), (8, 8), (9, 71), (72, 100)):
        metrics.ingest(tid, 1, _reports("training", range(lo, hi + 1)))
        metrics.ingest(tid, 1, _reports("validation", range(hi, hi + 1)))
    for group, name, n in (("training", "loss", 100), ("training", "acc", 100), ("validation", "loss", 4)):
        held = _stored(engine, tid, group, name)
        assert set(held) == {tid}, (group, name)
        text = metrics.series([tid], group, [name])[tid]
        assert text == held[tid] == _from_rows(engine, metrics, tid, group, name)
        points = json.loads(text)
        assert len(points) == n and points == sorted(points, key=lambda p: p["batches"])
    points = json.loads(metrics.series([tid], "training", ["loss"])[tid])
    assert [p["values"]["loss"] for p in points[:12]] == [ODD[s % len(ODD)] for s in range(1, 13)]
    assert points[0]["time"] == "2025-11-24T16:00:01.500Z"
    with engine.connect() as conn:
        blocks = conn.execute(sa.select(t.metric_series.c.block, t.metric_series.c.n).where(
            t.metric_series.c.trial_id == tid, t.metric_series.c.mgroup == "training",
            t.metric_series.c.name == "loss").order_by(t.metric_series.c.block)).all()
    assert blocks == [(0, 64), (1, 36)]
    with engine.connect() as conn:
        heads = conn.execute(sa.select(t.metric_series_steps.c.block, t.metric_series_steps.c.n).where(
            t.metric_series_steps.c.trial_id == tid, t.metric_series_steps.c.mgroup == "validation")).all()
    assert heads == [(0, 4)]


def test_a_chart_with_room_for_every_point_is_stored_one_that_needs_thinning_is_not(
    engine: sa.Engine, metrics: MetricService
) -> None:
    _, _, tid = make_world(engine)
    metrics.ingest(tid, 1, _reports("training", range(1, 51)))
    assert set(_stored(engine, tid, "training", "loss", max_points=50)) == {tid}
    assert _stored(engine, tid, "training", "loss", max_points=49) == {}
    thinned = json.loads(metrics.series([tid], "training", ["loss"], max_points=10)[tid])
    assert len(thinned) <= 10 and thinned[0]["batches"] == 1 and thinned[-1]["batches"] == 50
    # Several trials in one call: the stored and the rows' answers side by side.
    _, _, other = make_world(engine)
    metrics.ingest(other, 1, _reports("training", range(1, 6), note="text"))  # "note" is not a number
    both = metrics.series([tid, other], "training", ["note"])
    assert json.loads(both[tid])[0]["values"] == {}
    assert json.loads(both[other])[0]["values"] == {"note": "text"}
    both = metrics.series([tid, other], "training", ["loss"])
    assert both[tid] == _from_rows(engine, metrics, tid, "training", "loss")
    assert both[other] == _from_rows(engine, metrics, other, "training", "loss")


@pytest.mark.parametrize("case", ["missing", "nan", "string", "bool"])
def test_a_group_whose_reports_do_not_all_hold_the_metric_as_a_number_is_read_from_the_rows(
    engine: sa.Engine, metrics: MetricService, case: str
) -> None:
    _, _, tid = make_world(engine)
    metrics.ingest(tid, 1, _reports("training", range(1, 11)))
    odd = {"missing": {"acc": 1.0}, "nan": {"loss": float("nan")}, "string": {"loss": "x"},
           "bool": {"loss": True}}[case]
    metrics.ingest(tid, 1, [Report("training", 11, odd, 1_764_000_100.0)])
    metrics.ingest(tid, 1, _reports("training", range(12, 15)))
    assert _stored(engine, tid, "training", "loss") == {}
    points = json.loads(metrics.series([tid], "training", ["loss"])[tid])
    assert [p["batches"] for p in points] == list(range(1, 15))
    assert points[10]["values"] == {"missing": {}, "nan": {"loss": "NaN"}, "string": {"loss": "x"},
                                    "bool": {"loss": True}}[case]
    # Report 11 holds "acc" only where it lacks "loss".
    assert set(_stored(engine, tid, "training", "acc")) == ({tid} if case == "missing" else set())


@pytest.mark.parametrize("late", ["later batch", "same batch"])
def test_a_step_that_does_not_move_forward_drops_the_groups_stored_series(
    engine: sa.Engine, metrics: MetricService, late: str
) -> None:
    _, _, tid = make_world(engine)
    metrics.ingest(tid, 1, _reports("training", range(10, 30, 2)) + _reports("validation", range(10, 11)))
    if late == "later batch":
        metrics.ingest(tid, 1, _reports("training", range(15, 16)))  # between stored steps
    else:
        metrics.ingest(tid, 1, _reports("training", range(40, 41)) + _reports("training", range(35, 36)))
    metrics.ingest(tid, 1, _reports("training", range(50, 52)))
    assert _stored(engine, tid, "training", "loss") == {}
    steps = [p["batches"] for p in json.loads(metrics.series([tid], "training", ["loss"])[tid])]
    assert steps == sorted(steps) and len(steps) == (13 if late == "later batch" else 14)
    assert set(_stored(engine, tid, "validation", "loss")) == {tid}  # another group keeps its own


def test_reports_at_a_step_another_group_reached_keep_the_stored_series(
    engine: sa.Engine, metrics: MetricService
) -> None:
    """Validation at step 10 arrives after training at 10: each group moves forward on its own."""
    _, _, tid = make_world(engine)
    for s in (10, 20, 30):
        metrics.ingest(tid, 1, _reports("training", range(s - 9, s + 1)))
        metrics.ingest(tid, 1, _reports("validation", range(s, s + 1)))
    assert set(_stored(engine, tid, "validation", "loss")) == {tid}
    assert set(_stored(engine, tid, "training", "loss")) == {tid}


@pytest.mark.parametrize("table", ["metric_series", "metric_series_steps"])
def test_a_trial_stored_before_the_tables_existed_is_read_from_the_rows(
    engine: sa.Engine, metrics: MetricService, table: str
) -> None:
    _, _, tid = make_world(engine)
    metrics.ingest(tid, 1, _reports("training", range(1, 21)))
    with engine.begin() as conn:
        gone = t.metadata.tables[table]
        conn.execute(sa.delete(gone).where(gone.c.block == 0))  # as if stored before
    metrics.ingest(tid, 1, _reports("training", range(21, 41)))
    assert _stored(engine, tid, "training", "loss") == {}
    assert [p["batches"] for p in json.loads(metrics.series([tid], "training", ["loss"])[tid])] == list(range(1, 41))


def test_deleting_an_experiment_deletes_its_stored_series(engine: sa.Engine, metrics: MetricService) -> None:
    from det_jupyter.services.experiments import purge as _purge

    _, exp_id, tid = make_world(engine)
    _, _, kept = make_world(engine)
    for trial in (tid, kept):
        metrics.ingest(trial, 1, _reports("training", range(1, 40)))
    with engine.begin() as conn:
        _purge.purge_experiments(conn, [exp_id], "c-1")
    with engine.connect() as conn:
        for table in (t.metric_series, t.metric_series_steps):
            assert conn.execute(sa.select(table.c.trial_id).distinct()).scalars().all() == [kept]


def test_counts_the_caller_read_give_the_same_answer_and_a_stale_read_falls_back_to_the_rows(
    engine: sa.Engine, metrics: MetricService
) -> None:
    """The chart route passes the trial view's summary and report counts (``known``) instead of
    reading them again. Read before more reports landed, they count fewer than the blocks hold:
    the trial is then answered from the rows, which hold the new reports too."""
    from det_jupyter.services.experiments.views import Views

    _, _, tid = make_world(engine)
    metrics.ingest(tid, 1, _reports("training", range(1, 70)))
    views = Views(engine)

    def known() -> list[tuple]:
        (view,), _ = views.trials(trial_ids=[tid], count=False)
        return [(view.row.id, view.row.summary, view.row.report_counts)]

    fresh = known()
    with engine.connect() as conn:
        assert stored.read(conn, [tid], "training", "loss", 0, fresh) == _stored(engine, tid, "training", "loss")
    assert metrics.series([tid], "training", ["loss"], known=fresh) == metrics.series([tid], "training", ["loss"])
    metrics.ingest(tid, 1, _reports("training", range(70, 75)))
    with engine.connect() as conn:
        assert stored.read(conn, [tid], "training", "loss", 0, fresh) == {}  # 69 counted, 74 held
    points = json.loads(metrics.series([tid], "training", ["loss"], known=fresh)[tid])
    assert [p["batches"] for p in points] == list(range(1, 75))
    assert metrics.series([tid], "training", ["loss"], known=known()) == metrics.series([tid], "training", ["loss"])


def test_trials_read_with_their_histories_are_the_two_reads_apart(engine: sa.Engine, metrics: MetricService) -> None:
    """A trial page's chart reads the trials and the stored histories together (one round trip
    on PostgreSQL, pipelined): the same views and the same points as reading them apart, a
    trial whose series is incomplete answered from the rows, an unknown id absent."""
    from det_jupyter.services.experiments.views import Views

    from ._rows import make_trial

    _, exp_id, whole = make_world(engine)
    partial = make_trial(engine, exp_id)
    empty = make_trial(engine, exp_id)
    metrics.ingest(whole, 1, _reports("training", range(1, 80)))
    metrics.ingest(partial, 1, _reports("training", range(1, 5)))
    metrics.ingest(partial, 1, [Report("training", 5, {"acc": 1.0}, 1_764_000_100.0)])  # no loss
    views = Views(engine)
    ids = [whole, partial, empty, 987654]
    got, histories = views.trials_with_history(ids, "training", "loss")
    apart, _ = views.trials(trial_ids=ids, count=False)
    assert [(tuple(v.row), v.alloc_states) for v in got] == [(tuple(v.row), v.alloc_states) for v in apart]
    assert [v.row.id for v in got] == [whole, partial, empty]
    assert set(histories) == {whole}
    assert histories[whole] == _stored(engine, whole, "training", "loss")[whole]
    found = [v.row.id for v in got]
    known = [(v.row.id, v.row.summary, v.row.report_counts) for v in got]
    together = metrics.series(found, "training", ["loss"], known=known, histories=histories)
    assert together == metrics.series(found, "training", ["loss"])
    assert [p["batches"] for p in json.loads(together[partial])] == [1, 2, 3, 4, 5]
    assert together[empty] == "[]"
    # A metric no trial reported: no stored history, every trial from the rows.
    assert views.trials_with_history(ids, "training", "nosuch")[1] == {}


def test_a_block_whose_two_parts_count_differently_refuses_only_its_trial() -> None:
    """Heads and members are two reads, each on a snapshot of its own: a report that lands
    between them leaves a block's members one longer than its heads. That trial is refused (the
    chart answers it from the rows); the others are joined."""
    heads = [(1, 0, 2, ',{"batches":1,"values":{\n,{"batches":2,"values":{\n'),
             (2, 0, 1, ',{"batches":1,"values":{\n'), (2, 1, 1, ',{"batches":9,"values":{\n')]
    members = [(2, 1, 1, '"m":6}}\n'), (1, 0, 3, '"m":1}}\n"m":2}}\n"m":3}}\n'), (2, 0, 1, '"m":5}}\n')]
    joined = stored._joined(heads, members, {1: 2, 2: 2})
    assert joined == {2: '[{"batches":1,"values":{"m":5}},{"batches":9,"values":{"m":6}}]'}
    assert json.loads(joined[2]) == [{"batches": 1, "values": {"m": 5}}, {"batches": 9, "values": {"m": 6}}]
    assert stored._joined(heads, members[1:], {2: 2}) == {}  # a block's members missing


def test_a_chart_of_more_trials_than_an_old_sqlite_takes_parameters_is_read(
    engine: sa.Engine, metrics: MetricService
) -> None:
    """Up to 1,000 trials per chart: past ``_MOST_MARKS`` ids SQLite gets them inlined (an
    SQLite before 3.32 takes 999 parameters); the answer is the same either way."""
    _, _, tid = make_world(engine)
    metrics.ingest(tid, 1, _reports("training", range(1, 70)))
    alone = _stored(engine, tid, "training", "loss")
    many = [tid, *range(10_000, 10_000 + stored._MOST_MARKS + 499)]
    with engine.connect() as conn:
        assert stored.read(conn, many, "training", "loss", 0) == alone != {}


# (reports, max_points): levels 3 to 6; the last report sampled or not, at the level or not, in
# a full block or not; a first block that is also the last.
DOWNSAMPLED = [(1000, 200), (1000, 70), (1000, 33), (1000, 17), (256, 34), (256, 18), (200, 30),
               (203, 30), (211, 10), (60, 9), (64, 9), (71, 6)]


@pytest.mark.parametrize(("reports", "max_points"), DOWNSAMPLED, ids=[f"{r}-{m}" for r, m in DOWNSAMPLED])
def test_a_downsampled_chart_of_a_long_trial_comes_from_the_sampled_lines_and_equals_the_rows(
    engine: sa.Engine, metrics: MetricService, reports: int, max_points: int
) -> None:
    """A chart that fits a long trial in ``max_points`` at level 3 or more is read from each
    block's sampled lines and the first and last blocks: the same text the rows give, the first
    and the last report kept, every 2**level-th between."""
    _, _, tid = make_world(engine)
    lo = 1
    for size in (7, 1, 57, 3, 64, 129, 500, 1000):  # batches across block boundaries
        hi = min(lo + size - 1, reports)
        if lo <= hi:
            metrics.ingest(tid, 1, _reports("training", range(lo, hi + 1)))
        lo = hi + 1
    assert lo == reports + 1
    lod = charts.level(reports, max_points)
    assert t.CHART_INDEX_LOD <= lod <= t.MAX_LOD
    held = _stored(engine, tid, "training", "loss", max_points)
    assert set(held) == {tid}
    assert held[tid] == metrics.series([tid], "training", ["loss"], max_points=max_points)[tid]
    assert held[tid] == _from_rows(engine, metrics, tid, "training", "loss", max_points)
    steps = [p["batches"] for p in json.loads(held[tid])]
    level = [s for s in range(1, reports + 1) if s % (1 << lod) == 0]
    assert steps == sorted({1, *level, reports}) and len(steps) <= max_points


def test_a_chart_below_level_3_is_read_from_the_rows(engine: sa.Engine, metrics: MetricService) -> None:
    """Levels 1 and 2 (every 2nd or 4th report) are not in the sampled lines: from the rows."""
    _, _, tid = make_world(engine)
    metrics.ingest(tid, 1, _reports("training", range(1, 301)))
    for max_points, lod in ((200, 1), (100, 2), (50, 3)):
        assert charts.level(300, max_points) == lod
        assert set(_stored(engine, tid, "training", "loss", max_points)) == ({tid} if lod >= 3 else set())
        got = metrics.series([tid], "training", ["loss"], max_points=max_points)[tid]
        assert got == _from_rows(engine, metrics, tid, "training", "loss", max_points)


@pytest.mark.parametrize("table", ["metric_series", "metric_series_steps"])
def test_blocks_without_their_sampled_lines_are_read_from_the_rows(
    engine: sa.Engine, metrics: MetricService, table: str
) -> None:
    """A block that lacks its sampled lines (written before migration 8 and not filled) makes
    its trial's downsampled charts come from the rows; its whole history is still stored."""
    _, _, tid = make_world(engine)
    metrics.ingest(tid, 1, _reports("training", range(1, 301)))
    before = _stored(engine, tid, "training", "loss", 40)
    with engine.begin() as conn:
        part = t.metadata.tables[table]
        conn.execute(sa.update(part).where(part.c.block == 2).values(sampled=""))
    assert set(before) == {tid} and _stored(engine, tid, "training", "loss", 40) == {}
    assert metrics.series([tid], "training", ["loss"], max_points=40)[tid] == before[tid]
    assert set(_stored(engine, tid, "training", "loss")) == {tid}


def test_a_downsampled_chart_of_many_trials_answers_each_as_alone(engine: sa.Engine, metrics: MetricService) -> None:
    """Trials of different lengths in one chart: stored at their own levels, the short one whole,
    one whose series is incomplete from the rows; each answer what it is alone."""
    from ._rows import make_trial

    _, exp_id, first = make_world(engine)
    trials = [first, *(make_trial(engine, exp_id) for _ in range(3))]
    for tid, n in zip(trials, (500, 130, 20, 333), strict=True):
        metrics.ingest(tid, 1, _reports("training", range(1, n + 1)))
    metrics.ingest(trials[3], 1, [Report("training", 334, {"acc": 1.0}, 1_764_001_000.0)])  # no loss
    with engine.connect() as conn:
        held = stored.read(conn, trials, "training", "loss", 30)
    assert set(held) == {trials[0], trials[1], trials[2]}
    together = metrics.series(trials, "training", ["loss"], max_points=30)
    for tid in trials:
        assert together[tid] == metrics.series([tid], "training", ["loss"], max_points=30)[tid]
        assert together[tid] == _from_rows(engine, metrics, tid, "training", "loss", 30)
        if tid in held:
            assert held[tid] == together[tid]
