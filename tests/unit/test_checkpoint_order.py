"""Checkpoint and trial lists (pure): 0.38.1's filters, sort orders, tie-breaks and pages."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from det_jupyter.errors import InvalidRequest
from det_jupyter.services.checkpoints import order as co
from det_jupyter.services.experiments import trial_list as tl


def ckpt(uuid: str, trial: int | None, steps: int, t: float, metric: float | None = None,
         state: str = "COMPLETED", **validation: float) -> co.ListedCheckpoint:
    row = SimpleNamespace(uuid=uuid, trial_id=trial, steps_completed=steps, report_time=t, state=state)
    metrics = {"vloss": metric, **validation} if metric is not None else (validation or None)
    return co.ListedCheckpoint(row, {"loss": 1.0}, metrics, metric)


# Trial 1: a (0.5), b (0.2); trial 2: c (0.4), d (no validation), e (0.2, ties b, later); f deleted (0.1).
CKPTS = [
    ckpt("d", 2, 20, 105.0),
    ckpt("a", 1, 10, 100.0, 0.5, acc=0.7),
    ckpt("c", 2, 10, 101.0, 0.4, acc=0.9),
    ckpt("b", 1, 20, 102.0, 0.2, acc=0.8),
    ckpt("f", 1, 30, 104.0, 0.1, state="DELETED", acc=0.95),
    ckpt("e", 2, 30, 103.0, 0.2),
]

CASES = [
    # (id, query, smaller_is_better, uuids in order)
    ("unspecified: by trial, then report time", co.CheckpointQuery(), True, "abfced"),
    ("completed only", co.CheckpointQuery(states=frozenset({"COMPLETED"})), True, "abced"),
    ("two states", co.CheckpointQuery(states=frozenset({"DELETED", "ERROR"})), True, "f"),
    ("searcher metric, best first (smaller is better), nulls last, tie by report time",
     co.CheckpointQuery(sort_attr="SORT_BY_SEARCHER_METRIC"), True, "fbecad"),
    ("searcher metric, best first (larger is better), nulls still last",
     co.CheckpointQuery(sort_attr="SORT_BY_SEARCHER_METRIC"), False, "acebfd"),
    ("searcher metric, explicit ascending overrides the direction",
     co.CheckpointQuery(sort_attr="SORT_BY_SEARCHER_METRIC", order=co.ASC), False, "fbecad"),
    ("searcher metric descending: ties reverse too",
     co.CheckpointQuery(sort_attr="SORT_BY_SEARCHER_METRIC", order=co.DESC), True, "acebfd"),
    ("a validation metric ascending: missing first",
     co.CheckpointQuery(sort_metric="acc", order=co.ASC), True, "edabcf"),
    ("a validation metric descending: missing last",
     co.CheckpointQuery(sort_metric="acc", order=co.DESC), True, "fcbade"),
    ("batch number then report time", co.CheckpointQuery(sort_attr="SORT_BY_BATCH_NUMBER"), True, "acbdef"),
    ("batch number descending", co.CheckpointQuery(sort_attr="SORT_BY_BATCH_NUMBER", order=co.DESC), True, "fedbca"),
    ("end time", co.CheckpointQuery(sort_attr="SORT_BY_END_TIME"), True, "acbefd"),
    ("uuid descending", co.CheckpointQuery(sort_attr="SORT_BY_UUID", order=co.DESC), True, "fedcba"),
    ("trial id descending", co.CheckpointQuery(sort_attr="SORT_BY_TRIAL_ID", order=co.DESC), True, "decfba"),
    ("state (COMPLETED=2 before DELETED=4)", co.CheckpointQuery(sort_attr="SORT_BY_STATE"), True, "acbedf"),
]


@pytest.mark.parametrize(("query", "smaller", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_order_checkpoints(query: co.CheckpointQuery, smaller: bool, expected: str) -> None:
    got = co.order_checkpoints(CKPTS, query, smaller_is_better=smaller)
    assert "".join(c.row.uuid for c in got) == expected


def test_a_checkpoint_without_a_trial_sorts_first_by_trial() -> None:
    got = co.order_checkpoints([ckpt("x", 3, 1, 1.0), ckpt("y", None, 1, 2.0)], co.CheckpointQuery())
    assert [c.row.uuid for c in got] == ["y", "x"]


@pytest.mark.parametrize(("total", "offset", "limit", "bounds"), [
    (5, 0, 0, (0, 5)), (5, 0, 3, (0, 3)), (5, 3, 3, (3, 5)), (5, 5, 0, (5, 5)), (5, -2, 0, (3, 5)),
    (5, -5, 1, (0, 1)), (0, 0, 1, (0, 0)),
])
def test_checkpoint_page_bounds(total: int, offset: int, limit: int, bounds: tuple[int, int]) -> None:
    assert co.page_bounds(total, offset, limit) == bounds


@pytest.mark.parametrize(("total", "offset"), [(5, 6), (5, -6), (0, 1)])
def test_a_checkpoint_offset_out_of_bounds_is_refused(total: int, offset: int) -> None:
    with pytest.raises(InvalidRequest, match="offset"):
        co.page_bounds(total, offset, 0)


@pytest.mark.parametrize(("kw", "word"), [
    ({"sort_attr": "SORT_BY_UUID", "sort_metric": "loss"}, "sortByAttr or sortByMetric"),
    ({"sort_attr": "SORT_BY_NAME"}, "sortByAttr"),
    ({"limit": -1}, "limit"),
])
def test_a_bad_checkpoint_query_is_refused(kw: dict, word: str) -> None:
    with pytest.raises(InvalidRequest, match=word):
        co.CheckpointQuery(**kw)


@pytest.mark.parametrize(("metrics", "value"), [
    ({"m": 1}, 1.0), ({"m": 0.5}, 0.5), ({"m": True}, None), ({"m": "NaN"}, None),
    ({"m": float("inf")}, None), ({}, None), (None, None),
])
def test_metric_value(metrics: dict | None, value: float | None) -> None:
    assert co.metric_value(metrics, "m") == value


def report(rid: int, steps: int, **metrics: float) -> tl.ValidationReport:
    return tl.ValidationReport(rid, steps, 1000.0 + rid, metrics)


def test_a_trials_best_and_latest_validation() -> None:
    reports = [(1, report(1, 5, vloss=0.4)), (1, report(2, 10, vloss=0.2)), (1, report(3, 15, vloss=0.3)),
               (1, report(4, 20, other=1.0)),  # no searcher metric: neither best nor latest
               (2, report(5, 5, vloss=0.3)), (2, report(6, 10, vloss=0.3)),  # a tie: the earlier is best
               (3, report(7, 5, other=2.0))]
    got = tl.summarize(reports, "vloss", smaller_is_better=True)
    assert got[1].best.steps_completed == 10 and got[1].latest.steps_completed == 15
    assert got[2].best.id == 5 and got[2].latest.id == 6
    assert 3 not in got
    larger = tl.summarize(reports, "vloss", smaller_is_better=False)
    assert larger[1].best.steps_completed == 5 and larger[1].latest.steps_completed == 15


@pytest.mark.parametrize(("total", "offset", "limit", "bounds"), [
    (5, 0, 0, (0, 5)), (5, 2, 2, (2, 4)), (5, -2, 0, (3, 5)), (5, 6, 0, (5, 5)), (5, -6, 0, (5, 5)),
    (5, 4, 10, (4, 5)),
])
def test_trial_page_bounds_clamp_as_page_info_does(total: int, offset: int, limit: int,
                                                   bounds: tuple[int, int]) -> None:
    assert tl.page_bounds(total, offset, limit) == bounds


def test_trials_sorted_in_python_put_missing_values_last_and_break_ties_by_id() -> None:
    rows = [SimpleNamespace(id=i) for i in (1, 2, 3, 4)]
    values = {1: 0.5, 2: None, 3: 0.1, 4: 0.5}
    assert [r.id for r in tl.sort_in_python(rows, values, descending=False)] == [3, 1, 4, 2]
    assert [r.id for r in tl.sort_in_python(rows, values, descending=True)] == [2, 4, 1, 3]
