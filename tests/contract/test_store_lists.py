"""Checkpoint and trial lists on each backend: the reports joined at each checkpoint's step,
and every trial sort of ``GetExperimentTrials`` (the SQL ones and those sorted after reading)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from det_jupyter.services.checkpoints.order import CheckpointQuery
from det_jupyter.services.checkpoints.service import CheckpointService
from det_jupyter.services.common.clock import FakeClock
from det_jupyter.services.experiments.views import Views
from det_jupyter.services.metrics.service import MetricService, Report
from det_jupyter.store import tables as t

from ._rows import NOW, make_experiment, make_project, make_trial, make_user

CONFIG = {"searcher": {"metric": "loss", "smaller_is_better": True}}


@pytest.fixture
def lists(engine: sa.Engine, clock: FakeClock) -> tuple[int, list[int], CheckpointService, Views]:
    """Three trials of one experiment: trial A validates loss 0.5 then 0.2 (step 10, 20), B
    0.1 then 0.4, C nothing; each checkpoints at its validated steps (C at 10)."""
    user = make_user(engine, "lister")
    exp = make_experiment(engine, user, make_project(engine, user))
    a, b, c = (make_trial(engine, exp) for _ in range(3))
    metrics = MetricService(engine, clock)
    ckpts = CheckpointService(engine, clock)
    for tid, losses in ((a, (0.5, 0.2)), (b, (0.1, 0.4)), (c, ())):
        reports = [Report("training", s, {"tl": s / 100}, NOW) for s in (10, 20)]
        reports += [Report("validation", 10 * (i + 1), {"loss": v, "acc": 1 - v}, NOW) for i, v in enumerate(losses)]
        metrics.ingest(tid, 1, reports)
        for steps in ((10, 20) if losses else (10,)):
            clock.advance(1)
            ckpts.report({"uuid": f"{tid}-{steps}", "metadata": {"steps_completed": steps},
                          "resources": {"w": steps}},
                         trial_id=tid, task_id=None, allocation_id=None)
    with engine.begin() as conn:  # what the searcher would have stored
        for tid, best, total, end, restarts in ((a, 0.2, 20, NOW + 50, 0), (b, 0.1, 20, None, 2),
                                                (c, None, 10, NOW + 10, 1)):
            conn.execute(sa.update(t.trials).where(t.trials.c.id == tid).values(
                best_validation=best, total_batches=total, end_time=end, restarts=restarts,
                state="COMPLETED" if end else "ACTIVE"))
    return exp, [a, b, c], ckpts, Views(engine)


def test_checkpoints_carry_the_reports_at_their_step(lists) -> None:
    exp, (a, b, c), ckpts, _ = lists
    page = ckpts.listing(CONFIG, CheckpointQuery(sort_attr="SORT_BY_SEARCHER_METRIC"), experiment_id=exp)
    assert [i.row.uuid for i in page.items] == [f"{b}-10", f"{a}-20", f"{b}-20", f"{a}-10", f"{c}-10"]
    first = page.items[0]
    assert first.searcher_metric == pytest.approx(0.1)
    assert first.validation_metrics == pytest.approx({"loss": 0.1, "acc": 0.9})
    assert first.training_metrics == pytest.approx({"tl": 0.1})
    last = page.items[-1]
    assert last.searcher_metric is None and last.validation_metrics is None
    assert last.training_metrics == pytest.approx({"tl": 0.1})
    assert (page.total, page.start, page.end) == (5, 0, 5)

    paged = ckpts.listing(CONFIG, CheckpointQuery(sort_metric="acc", order="ORDER_BY_DESC", offset=1, limit=2),
                          experiment_id=exp)
    assert [i.row.uuid for i in paged.items] == [f"{a}-20", f"{b}-20"]
    assert (paged.total, paged.start, paged.end) == (5, 1, 3)
    trial = ckpts.listing(CONFIG, CheckpointQuery(sort_attr="SORT_BY_BATCH_NUMBER", order="ORDER_BY_DESC"),
                          trial_id=a)
    assert [i.row.uuid for i in trial.items] == [f"{a}-20", f"{a}-10"]
    assert ckpts.with_metrics(f"{a}-20", CONFIG).searcher_metric == pytest.approx(0.2)


def test_an_archived_validation_is_not_a_checkpoints_metric(lists, engine: sa.Engine) -> None:
    exp, (a, _, _), ckpts, _ = lists
    with engine.begin() as conn:  # a rewind past step 20 archived its reports
        conn.execute(sa.update(t.metrics).where(t.metrics.c.trial_id == a, t.metrics.c.steps_completed == 20)
                     .values(archived=True))
    got = ckpts.with_metrics(f"{a}-20", CONFIG)
    assert got.searcher_metric is None and got.validation_metrics is None and got.training_metrics is None


@pytest.mark.parametrize(("sort_by", "ascending"), [
    ("SORT_BY_ID", "abc"),
    ("SORT_BY_UNSPECIFIED", "abc"),
    ("SORT_BY_START_TIME", "abc"),            # all equal: by id
    ("SORT_BY_END_TIME", "cab"),              # b has none: last ascending
    ("SORT_BY_STATE", "bac"),                 # ACTIVE < COMPLETED, then id
    ("SORT_BY_BEST_VALIDATION_METRIC", "bac"),  # 0.1, 0.2, none
    ("SORT_BY_LATEST_VALIDATION_METRIC", "abc"),  # 0.2, 0.4, none
    ("SORT_BY_BATCHES_PROCESSED", "cab"),
    ("SORT_BY_DURATION", "cab"),              # 10 s, 50 s, b still running (100 s by now)
    ("SORT_BY_RESTARTS", "acb"),
    ("SORT_BY_CHECKPOINT_SIZE", "cab"),       # 10, 30, 30 bytes
    ("SORT_BY_LOG_RETENTION_DAYS", "abc"),
])
def test_every_trial_sort_in_both_directions(lists, sort_by: str, ascending: str) -> None:
    exp, ids, _, views = lists
    named = dict(zip("abc", ids, strict=True))
    for descending, want in ((False, ascending), (True, ascending[::-1])):
        got, total, start, _ = views.experiment_trials(exp, CONFIG, sort_by=sort_by, descending=descending,
                                                       now=NOW + 100)
        assert [v.row.id for v in got] == [named[x] for x in want], (sort_by, descending)
        assert (total, start) == (3, 0)


def test_a_trial_page_and_its_validations(lists) -> None:
    exp, (a, b, c), _, views = lists
    got, total, start, validations = views.experiment_trials(
        exp, CONFIG, sort_by="SORT_BY_BEST_VALIDATION_METRIC", offset=-2, limit=1)
    assert [v.row.id for v in got] == [a] and (total, start) == (3, 1)
    assert validations[a].best.steps_completed == 20 and validations[a].latest.steps_completed == 20
    _, _, _, every = views.experiment_trials(exp, CONFIG)
    assert every[b].best.steps_completed == 10 and every[b].latest.steps_completed == 20
    assert c not in every
    larger = views.validations([a, b], {"searcher": {"metric": "loss", "smaller_is_better": False}})
    assert larger[a].best.steps_completed == 10 and larger[b].best.steps_completed == 20
    active, total, start, _ = views.experiment_trials(exp, CONFIG, states=["ACTIVE"])
    assert [v.row.id for v in active] == [b] and (total, start) == (1, 0)
    assert views.experiment_trials(exp, CONFIG, offset=5)[:3] == ([], 3, 3)
