"""The widgets' pure views (det_jupyter.widgets._views): API JSON in, what is shown out."""

from __future__ import annotations

from typing import Any

import pytest

from det_jupyter.widgets import _views as v


def exp(id: int, name: str = "e", state: str = "STATE_ACTIVE", **kw: Any) -> dict[str, Any]:
    return {"id": id, "name": name, "username": kw.pop("user", "admin"), "state": state, **kw}


@pytest.mark.parametrize(("state", "actions"), [
    ("STATE_ACTIVE", ["pause", "kill"]),
    ("STATE_RUNNING", ["pause", "kill"]),
    ("STATE_QUEUED", ["pause", "kill"]),
    ("PAUSED", ["activate", "kill"]),
    ("STATE_STOPPING_CANCELED", ["kill"]),
    ("STATE_STOPPING_KILLED", []),
    ("STATE_COMPLETED", []),
    ("STATE_ERROR", []),
    (None, []),
])
def test_allowed_actions(state: str | None, actions: list[str]) -> None:
    assert v.allowed_actions(state) == actions


def test_experiment_row_is_the_wire_json_flattened() -> None:
    row = v.experiment_row(exp(3, "mnist", "STATE_RUNNING", progress=0.25, numTrials=4,
                               searcherMetric="loss", bestTrialSearcherMetric=0.5,
                               bestTrialId=7, startTime="2026-11-23T01:02:03.456Z"))
    assert row == {"id": 3, "name": "mnist", "owner": "admin", "state": "RUNNING",
                   "progress": 0.25, "trials": 4, "metric": "loss", "best": 0.5,
                   "best_trial": 7, "start": "2026-11-23 01:02:03", "end": "",
                   "actions": ["pause", "kill"]}


EXPS = [exp(1, "alpha", "STATE_COMPLETED", bestTrialSearcherMetric=0.3, user="ann"),
        exp(2, "beta", "STATE_RUNNING", bestTrialSearcherMetric=0.1),
        exp(3, "Alphabet", "STATE_PAUSED"),
        exp(4, "gamma", "STATE_RUNNING", bestTrialSearcherMetric=0.2)]


@pytest.mark.parametrize(("kw", "ids"), [
    ({}, [4, 3, 2, 1]),
    ({"descending": False}, [1, 2, 3, 4]),
    ({"text": "alpha"}, [3, 1]),
    ({"text": "ANN"}, [1]),
    ({"text": "4"}, [4]),
    ({"states": ["RUNNING"]}, [4, 2]),
    ({"states": ["STATE_PAUSED", "COMPLETED"]}, [3, 1]),
    ({"sort": "best", "descending": False}, [2, 4, 1, 3]),  # no metric: last either way
    ({"sort": "best"}, [1, 4, 2, 3]),
    ({"sort": "name", "descending": False}, [3, 1, 2, 4]),
    ({"text": "zzz"}, []),
])
def test_experiment_rows_filter_and_sort(kw: dict[str, Any], ids: list[int]) -> None:
    assert [r["id"] for r in v.experiment_rows(EXPS, **kw)] == ids


def test_experiment_rows_refuses_an_unknown_sort_column() -> None:
    with pytest.raises(ValueError, match="sort must be one of id, name"):
        v.experiment_rows(EXPS, sort="colour")


@pytest.mark.parametrize(("fraction", "text"), [(None, "—"), (0.0, "—"), (0.4567, "45.7%"), (1.0, "100.0%")])
def test_progress_text(fraction: float | None, text: str) -> None:
    assert v.progress_text(fraction) == text  # 0: the master's figure before any report


@pytest.mark.parametrize(("names", "current", "preferred", "choice"), [
    (["batches", "validation_loss"], None, "validation_loss", "validation_loss"),
    (["batches", "validation_loss"], "batches", "validation_loss", "batches"),
    (["acc", "batches"], "gone", "validation_loss", "acc"),
    ([], "loss", "loss", None),
])
def test_metric_choice_keeps_the_shown_metric(names: list[str], current: str | None,
                                              preferred: str | None, choice: str | None) -> None:
    assert v.metric_choice(names, current, preferred) == choice


def rep(step: int, **metrics: Any) -> dict[str, Any]:
    return {"steps_completed": step, "metrics": metrics}


def test_curves_per_group_metric_and_trial_sorted_by_step() -> None:
    data = {
        2: {"training": [rep(2, loss=0.5), rep(1, loss=1.0)], "validation": [rep(2, val=0.7)]},
        1: {"training": [rep(1, loss=2.0, note="x", flag=True), rep(2, loss=float("nan"))],
            "validation": []},
    }
    assert v.curves(data) == {
        "training": {"loss": {1: {"x": [1], "y": [2.0]}, 2: {"x": [1, 2], "y": [1.0, 0.5]}}},
        "validation": {"val": {2: {"x": [2], "y": [0.7]}}},
    }
    assert v.curves({}) == {"training": {}, "validation": {}}


@pytest.mark.parametrize(("smaller", "expected"), [(True, 2), (False, 3)])
def test_best_trial(smaller: bool, expected: int) -> None:
    trials = [{"id": 1, "searcherMetricValue": None}, {"id": 2, "searcherMetricValue": 0.1, "hparams": {"a": 1}},
              {"id": 3, "searcherMetricValue": 0.9, "hparams": {"a": 2}},
              {"id": 4, "searcherMetricValue": 0.1}]
    best = v.best_trial(trials, smaller)
    assert best is not None and best["id"] == expected
    assert v.best_trial([{"id": 1}]) is None


ASHA = {"name": "adaptive_asha", "metric": "validation_loss", "smaller_is_better": True,
        "time_metric": "batches", "max_time": 400, "max_trials": 16, "max_rungs": 3,
        "divisor": 4, "mode": "aggressive"}


def val(step: int, loss: float) -> dict[str, Any]:
    return rep(step, validation_loss=loss, batches=step)


def test_asha_rungs_say_which_trials_stopped_where() -> None:
    trials = [{"id": 1, "state": "STATE_COMPLETED"}, {"id": 2, "state": "STATE_COMPLETED"},
              {"id": 3, "state": "STATE_COMPLETED"}, {"id": 4, "state": "STATE_RUNNING"},
              {"id": 5, "state": "STATE_QUEUED"}]
    validations = {
        1: [val(25, 0.9)],                                       # stopped at rung 0
        2: [val(25, 0.5), val(50, 0.45), val(100, 0.4)],         # stopped at rung 1
        3: [val(25, 0.6), val(100, 0.3), val(400, 0.2)],         # went all the way
        4: [val(25, 0.7), val(75, 0.65)],                        # running past rung 0
        5: [],
    }
    assert v.asha_rungs(ASHA, trials, validations) == [
        {"rung": 0, "units": 25, "reached": [1, 2, 3, 4], "stopped": [1], "running": [4], "best": 0.5},
        {"rung": 1, "units": 100, "reached": [2, 3], "stopped": [2], "running": [], "best": 0.3},
        {"rung": 2, "units": 400, "reached": [3], "stopped": [], "running": [], "best": 0.2},
    ]


def test_asha_rungs_legacy_max_length_uses_steps_and_bigger_is_better() -> None:
    searcher = {"name": "adaptive_asha", "metric": "acc", "smaller_is_better": False,
                "max_length": {"batches": 90}, "max_trials": 9, "divisor": 3, "max_rungs": 5}
    trials = [{"id": 1, "state": "STATE_CANCELED"}, {"id": 2, "state": "STATE_COMPLETED"}]
    validations = {1: [rep(10, acc=0.2)], 2: [rep(10, acc=0.1), rep(30, acc=0.5), rep(90, acc=0.8)]}
    rungs = v.asha_rungs(searcher, trials, validations)
    assert [(r["units"], r["reached"], r["stopped"], r["best"]) for r in rungs] == [
        (10, [1, 2], [1], 0.2), (30, [2], [], 0.5), (90, [2], [], 0.8)]


@pytest.mark.parametrize("searcher", [{"name": "single", "max_length": {"batches": 5}},
                                      {"name": "adaptive_asha", "max_time": 0}])
def test_asha_rungs_empty_for_other_searchers(searcher: dict[str, Any]) -> None:
    assert v.asha_rungs(searcher, [{"id": 1, "state": "STATE_ACTIVE"}], {}) == []


def test_hparam_coords_numeric_categorical_nested_and_constant() -> None:
    trials = [
        {"id": 2, "hparams": {"lr": 0.1, "opt": "sgd", "net": {"depth": 2}, "bs": 32},
         "searcherMetricValue": 0.5},
        {"id": 1, "hparams": {"lr": 0.01, "opt": "adam", "net": {"depth": 3}, "bs": 32},
         "searcherMetricValue": None},
    ]
    assert v.hparam_coords(trials, "loss") == {
        "trial_ids": [1, 2],
        "dimensions": [
            {"label": "lr", "values": [0.01, 0.1]},
            {"label": "net.depth", "values": [3, 2]},
            {"label": "opt", "values": [0, 1], "tickvals": [0, 1], "ticktext": ["adam", "sgd"]},
            {"label": "loss", "values": [None, 0.5]},
        ],
        "color": [None, 0.5],
    }
    assert v.hparam_coords([]) == {"trial_ids": [], "dimensions": [], "color": []}


def test_trial_rows() -> None:
    assert v.trial_rows([{"id": 5, "state": "STATE_RUNNING", "totalBatchesProcessed": 10,
                          "searcherMetricValue": 0.2, "restarts": 1, "hparams": {"b": 1, "a": 2}}]) == [
        {"id": 5, "state": "RUNNING", "batches": 10, "metric": 0.2, "restarts": 1,
         "hparams": '{"a": 2, "b": 1}'}]


def test_metrics_table_joins_training_and_validation_by_step() -> None:
    headers, rows = v.metrics_table([rep(1, loss=1.0), rep(2, loss=0.5)],
                                    [rep(2, validation_loss=0.6, batches=2)])
    assert headers == ["Batches", "training.loss", "validation.batches", "validation.validation_loss"]
    assert rows == [[1, 1.0, None, None], [2, 0.5, 2, 0.6]]
    assert v.metrics_table([], []) == (["Batches"], [])


@pytest.mark.parametrize(("n", "text"), [(2, "b\nc"), (10, "a\nb\nc"), (0, "")])
def test_log_tail(n: int, text: str) -> None:
    assert v.log_tail(["a", "b", "c"], n) == text


def test_checkpoint_rows_by_step() -> None:
    ckpts = [{"uuid": "b", "state": "STATE_COMPLETED", "metadata": {"steps_completed": 10},
              "resources": {"x": 1, "y": 2}, "reportTime": "2026-01-01T00:00:00Z"},
             {"uuid": "a", "state": "STATE_COMPLETED", "metadata": {"steps_completed": 5}}]
    assert v.checkpoint_rows(ckpts) == [
        {"uuid": "a", "state": "COMPLETED", "batches": 5, "files": 0, "time": ""},
        {"uuid": "b", "state": "COMPLETED", "batches": 10, "files": 2, "time": "2026-01-01 00:00:00"}]


JOBS = [
    {"jobId": "j1", "type": "TYPE_EXPERIMENT", "name": "a", "priority": 42, "weight": 1,
     "summary": {"state": "STATE_SCHEDULED", "jobsAhead": 0}, "allocatedSlots": 2,
     "requestedSlots": 2, "username": "admin", "resourcePool": "default"},
    {"jobId": "j2", "type": "TYPE_EXPERIMENT", "name": "b", "priority": 50, "weight": 1,
     "summary": {"state": "STATE_QUEUED", "jobsAhead": 1}, "allocatedSlots": 0,
     "requestedSlots": 4, "username": "ann", "resourcePool": "default",
     "waitReason": "behind job j1 (priority 42)"},
    {"jobId": "j3", "type": "TYPE_COMMAND", "name": "c", "summary": {"state": "STATE_QUEUED",
     "jobsAhead": 2}},
]


def test_job_rows() -> None:
    rows = v.job_rows(JOBS)
    assert rows[1] == {"position": 1, "job_id": "j2", "type": "EXPERIMENT", "name": "b",
                       "state": "QUEUED", "jobs_ahead": 1, "priority": 50, "weight": 1,
                       "slots": "0/4", "user": "ann", "pool": "default",
                       "wait_reason": "behind job j1 (priority 42)"}
    assert [(r["position"], r["job_id"], r["wait_reason"], r["slots"]) for r in rows] == [
        (0, "j1", "", "2/2"), (1, "j2", "behind job j1 (priority 42)", "0/4"), (2, "j3", "", "0/0")]


@pytest.mark.parametrize(("job", "direction", "update"), [
    ("j2", "up", {"jobId": "j2", "aheadOf": "j1"}),
    ("j2", "down", {"jobId": "j2", "behindOf": "j3"}),
    ("j1", "up", None),
    ("j3", "down", None),
    ("nope", "up", None),
])
def test_queue_move(job: str, direction: str, update: dict[str, str] | None) -> None:
    assert v.queue_move(v.job_rows(JOBS), job, direction) == update


def test_queue_move_refuses_a_bad_direction() -> None:
    with pytest.raises(ValueError, match="'up' or 'down'"):
        v.queue_move(v.job_rows(JOBS), "j1", "sideways")


AGENTS = [
    {"id": "gpu-host", "resourcePools": ["gpu"], "slots": {
        "1": {"id": "1", "device": {"type": "TYPE_CUDA", "brand": "H100"}, "enabled": True,
              "container": {"id": "alloc-1"},
              "stats": {"gpu_percent": 87, "memory_used": 2 * 2**30, "memory_total": 80 * 2**30}},
        "0": {"id": "0", "device": {"type": "TYPE_CUDA", "brand": "H100"}, "enabled": False,
              "container": None}}},
    {"id": "cpu-host", "resourcePools": ["default"], "slots": {
        "0": {"id": "0", "device": {"type": "TYPE_CPU", "brand": ""}, "enabled": True}}},
]


def test_slot_rows_with_gpu_stats() -> None:
    assert v.slot_rows(AGENTS) == [
        {"agent": "cpu-host", "pool": "default", "slot": "0", "type": "CPU", "device": "",
         "enabled": True, "busy": False, "gpu_percent": None, "memory": ""},
        {"agent": "gpu-host", "pool": "gpu", "slot": "0", "type": "CUDA", "device": "H100",
         "enabled": False, "busy": False, "gpu_percent": None, "memory": ""},
        {"agent": "gpu-host", "pool": "gpu", "slot": "1", "type": "CUDA", "device": "H100",
         "enabled": True, "busy": True, "gpu_percent": 87, "memory": "2048 MiB / 81920 MiB"},
    ]
    assert v.cluster_summary(AGENTS) == {"agents": 2, "slots": 3, "busy": 1, "disabled": 1}


@pytest.mark.parametrize(("response", "text"), [
    (None, v.REGISTRY_UNAVAILABLE), ({"models": []}, "0 models registered"),
    ({"models": [{"name": "m"}]}, "1 model registered"),
])
def test_registry_message(response: dict[str, Any] | None, text: str) -> None:
    assert v.registry_message(response) == text


def test_html_table_escapes_and_aligns() -> None:
    assert v.html_table(["a", "<b>"], [[1, "<x>"], [None, 0.5]]) == (
        "<table class='det-jupyter-table' style='border-collapse:collapse'><thead><tr>"
        "<th style='text-align:left;padding:2px 8px'>a</th>"
        "<th style='text-align:left;padding:2px 8px'>&lt;b&gt;</th></tr></thead><tbody>"
        "<tr><td style='text-align:right;padding:2px 8px'>1</td>"
        "<td style='text-align:left;padding:2px 8px'>&lt;x&gt;</td></tr>"
        "<tr><td style='text-align:left;padding:2px 8px'></td>"
        "<td style='text-align:right;padding:2px 8px'>0.5</td></tr></tbody></table>")


@pytest.mark.parametrize(("value", "html_shown"), [
    ("<svg onload=alert(1)>", "&lt;svg onload=alert(1)&gt;"),
    ("Tom & \"Jerry\" 'x'", "Tom &amp; &quot;Jerry&quot; &#x27;x&#x27;"),
    ("gpj.\u202eexe", "gpj.\\u202eexe"),
    ("a\0b\x1b", "a\\0b\\x1b"),
    ("Équipe 模型", "Équipe 模型"),
    (None, ""), (0.5, "0.5"),
])
def test_text_from_the_master_is_never_markup_nor_invisible(value: Any, html_shown: str) -> None:
    assert v.html_text(value) == html_shown


def test_html_table_shows_hostile_names_as_text() -> None:
    out = v.html_table(["lo\u202ess"], [["<img src=x onerror=alert(1)>\u2066"]])
    assert "<img" not in out and "&lt;img src=x onerror=alert(1)&gt;\\u2066" in out
    assert "lo\\u202ess" in out and "\u202e" not in out and "\u2066" not in out
