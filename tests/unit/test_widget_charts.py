"""The chart widget's wire form and widgets fed by named test doubles (no kernel, no master).

What the browser draws from that wire form (and again after a page reload) is tested in
``tests/browser/test_widget_chart.py``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

pytest.importorskip("anywidget", reason="the widgets need anywidget (a product dependency)")

from det_jupyter.widgets import ClusterWidget, ExperimentWidget, TrialWidget  # noqa: E402
from det_jupyter.widgets._charts import (  # noqa: E402
    MAX_POINTS,
    line_chart,
    panel,
    parcoords_chart,
    set_coords,
    set_panels,
    thin,
)
from det_jupyter.widgets._views import crash_reason  # noqa: E402


def test_panels_send_no_nan_or_infinity() -> None:
    p = panel("loss", {"trial 1": {"x": [1, 2, 3, 4, 5], "y": [1.0, math.nan, math.inf, -math.inf, True]}})
    assert p["series"][0]["y"] == [1.0, None, None, None, None]
    json.dumps(p, allow_nan=False)  # raises on NaN or infinity
    chart = line_chart()
    set_panels(chart, [p])
    json.dumps(chart.get_state()["panels"], allow_nan=False)


def test_set_panels_sends_only_changes() -> None:
    chart = line_chart()
    sent: list[Any] = []
    chart.observe(lambda change: sent.append(change["new"]), names="panels")
    one = [panel("loss", {"trial 1": {"x": [1], "y": [0.5]}})]
    set_panels(chart, one)
    set_panels(chart, [panel("loss", {"trial 1": {"x": [1], "y": [0.5]}})])
    assert len(sent) == 1
    set_panels(chart, [panel("loss", {"trial 1": {"x": [1, 2], "y": [0.5, 0.25]}})])
    assert len(sent) == 2 and sent[-1][0]["series"][0]["y"] == [0.5, 0.25]


def test_series_keep_their_colour_by_place_and_long_ones_are_thinned() -> None:
    p = panel("v", {"trial 2": {"x": [], "y": []}, "trial 5": {"x": [1], "y": [2.0]}})
    assert [(s["name"], s["color"]) for s in p["series"]] == [("trial 2", 0), ("trial 5", 1)]
    xs = list(range(10 * MAX_POINTS + 7))
    tx, ty = thin(xs, xs)
    assert len(tx) == MAX_POINTS and tx[0] == 0 and tx[-1] == xs[-1] and tx == ty
    assert tx == sorted(set(tx))
    assert thin([1, 2], [3, 4]) == ([1, 2], [3, 4])


def test_parcoords_categorical_ticks_and_missing_metric() -> None:
    chart = parcoords_chart()
    coords = {"trial_ids": [1, 2], "color": [None, 0.5], "dimensions": [
        {"label": "opt", "values": [0, 1], "tickvals": [0, 1], "ticktext": ["adam", "sgd"]},
        {"label": "loss", "values": [None, math.nan]}]}
    set_coords(chart, "hyperparameters", coords, "loss")
    assert chart.coords == {
        "title": "hyperparameters", "trial_ids": [1, 2], "color": [None, 0.5], "colorLabel": "loss",
        "empty": "no hyperparameters vary yet",
        "dimensions": [{"label": "opt", "values": [0.0, 1.0], "ticktext": ["adam", "sgd"]},
                       {"label": "loss", "values": [None, None]}]}
    json.dumps(chart.coords, allow_nan=False)


def test_crash_reason_is_the_last_tracebacks_exception_line() -> None:
    lines = ["[rank=0] step 1", "Traceback (most recent call last):", '  File "a.py", line 1',
             "    boom()", "RuntimeError: first", "", "During handling of the above exception:",
             "[rank=0] Traceback (most recent call last):", '[rank=0]   File "train.py", line 9',
             "[rank=0]     raise ValueError('boom')", "[rank=0] ValueError: boom", "exited with code 1"]
    assert crash_reason(lines) == "ValueError: boom"
    assert crash_reason(["all fine", "exited with code 1"]) is None
    assert crash_reason(["Traceback (most recent call last):", '  File "x"']) is None


class StaticCluster:
    """A ``Determined`` stand-in that serves one fixed agent list."""

    username = "admin"

    def __init__(self, agents: list[dict[str, Any]]) -> None:
        self.agents = agents
        self.calls = 0

    def list_agents(self) -> list[dict[str, Any]]:
        self.calls += 1
        return self.agents


def test_cluster_widget_renders_the_first_fetch_and_close_stops_polling() -> None:
    det = StaticCluster([{"id": "a1", "resourcePools": ["default"], "slots": {
        "0": {"id": "0", "device": {"type": "TYPE_CPU"}, "enabled": True, "container": {"id": "x"}}}}])
    w = ClusterWidget(det, interval=60)  # type: ignore[arg-type]
    assert det.calls == 1 and w.poller.running
    assert w.summary.value == ("<b>1</b> agent(s) · <b>1</b> slot(s) · 1 busy · 0 disabled")
    assert ">a1<" in w.table.value
    w.close()
    w.poller._thread.join(5)  # type: ignore[union-attr]
    assert not w.poller.running


class ScriptedExperiment:
    """A ``Determined`` stand-in serving experiment 1 with one running trial (7) whose
    reports are what the test last put in ``training`` / ``validation``."""

    username = "admin"

    def __init__(self) -> None:
        self.training: list[dict[str, Any]] = []
        self.validation: list[dict[str, Any]] = []
        self.killed = 0

    def get_experiment(self, exp_id: int) -> _Experiment:
        return _Experiment(self)


class _Experiment:
    def __init__(self, det: ScriptedExperiment) -> None:
        self.det = det

    def to_dict(self) -> dict[str, Any]:
        return {"id": 1, "name": "e", "state": "STATE_RUNNING", "progress": 0.0, "numTrials": 1,
                "config": {"searcher": {"name": "single", "metric": "validation_loss"}}}

    def trials(self) -> list[_Trial]:
        return [_Trial(self.det)]

    def kill(self) -> None:
        self.det.killed += 1


class _Trial:
    id = 7
    state = "RUNNING"

    def __init__(self, det: ScriptedExperiment) -> None:
        self.det = det

    def to_dict(self) -> dict[str, Any]:
        return {"id": 7, "state": "STATE_RUNNING", "hparams": {"x": 1.0}}

    def metrics(self) -> dict[str, list[dict[str, Any]]]:
        return {"training": list(self.det.training), "validation": list(self.det.validation)}


class RecordingExperimentWidget(ExperimentWidget):
    """Records the metric pair each chart redraw shows."""

    def _draw_curves(self) -> None:
        self.draws = [*getattr(self, "draws", []), (self.train_metric.value, self.val_metric.value)]
        super()._draw_curves()


def report(at: int, **metrics: float) -> dict[str, Any]:
    return {"steps_completed": at, "metrics": metrics}


def test_experiment_widget_redraws_once_per_update_and_keeps_the_chosen_metric() -> None:
    det = ScriptedExperiment()
    det.training = [report(1, loss=1.0, step=1)]
    w = RecordingExperimentWidget(1, det, interval=60)  # type: ignore[arg-type]
    try:
        assert "progress —" in w.header.value  # the master's 0 before any progress report
        assert w.draws == [("loss", None)]
        training, validation_panel = w.curves_chart.panels
        assert training["series"][0]["y"] == [1.0] and training["ylabel"] == "loss"
        assert validation_panel["series"] == [] and validation_panel["empty"] == "no validation metrics yet"
        # New metric names (the first validation, then one sorting first) change the
        # dropdowns' options, which alone would jump them to their first option and draw it.
        for validation in ([report(4, validation_loss=0.25, batches=4)],
                           [report(4, validation_loss=0.25, batches=4),
                            report(8, validation_loss=0.125, batches=8, accuracy=0.9)]):
            det.validation = validation
            det.training = [*det.training, report(len(det.training) + 1, loss=0.5, step=2)]
            w.draws = []
            w._apply(w._fetch())
            assert w.draws == [("loss", "validation_loss")]
            assert w.curves_chart.panels[1]["series"][0]["y"] == [
                r["metrics"]["validation_loss"] for r in validation]
        assert list(w.val_metric.options) == ["accuracy", "batches", "validation_loss"]
        w.draws = []
        w.val_metric.value = "accuracy"  # the user's choice still redraws at once
        assert w.draws == [("loss", "accuracy")]
        assert w.curves_chart.panels[1]["series"][0]["y"] == [0.9]
        assert w.curves_chart.panels[1]["ylabel"] == "accuracy"
    finally:
        w.close()


def test_kill_asks_first_and_cancel_does_nothing() -> None:
    det = ScriptedExperiment()
    w = ExperimentWidget(1, det, interval=60)  # type: ignore[arg-type]
    try:
        assert w.confirm in w.children and w.confirm.layout.display == "none"
        w.buttons["kill"].click()
        assert det.killed == 0 and w.confirm.layout.display == "flex"
        question, yes, cancel = w.confirm.children
        assert "Kill experiment 1?" in question.value and yes.description == "Yes, kill"
        cancel.click()
        assert det.killed == 0 and w.confirm.layout.display == "none"
        w.buttons["kill"].click()
        w.confirm.children[1].click()
        assert det.killed == 1 and w.confirm.layout.display == "none"
    finally:
        w.close()


class HostileExperiment(ScriptedExperiment):
    """Experiment 1 with a name, searcher metric and metric names that try markup and bidi."""

    def get_experiment(self, exp_id: int) -> _Experiment:
        return _HostileExperiment(self)


class _HostileExperiment(_Experiment):
    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "name": "<svg onload=alert(1)>gpj.\u202eexe",
                "state": "STATE_<script>",
                "config": {"searcher": {"name": "<b>single", "metric": "<img src=x onerror=alert(2)>"}}}

    def trials(self) -> list[_Trial]:
        return [_HostileTrial(self.det)]


class _HostileTrial(_Trial):
    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "searcherMetricValue": 0.5, "hparams": {"<u>opt": "<b>adam"}}


def test_experiment_widget_shows_hostile_names_as_text() -> None:
    det = HostileExperiment()
    det.training = [report(1, **{"<i>loss\u202e": 1.0})]
    det.validation = [report(1, **{"<img src=x onerror=alert(2)>": 0.5})]
    w = ExperimentWidget(1, det, interval=60)  # type: ignore[arg-type]
    try:
        header = w.header.value
        for raw in ("<svg", "<script>", "<b>single", "<img", "\u202e"):
            assert raw not in header
        assert "&lt;svg onload=alert(1)&gt;gpj.\\u202eexe" in header
        assert "&lt;img src=x onerror=alert(2)&gt; = 0.5" in header
        # The chart shows names as text (textContent), invisible characters made visible.
        assert [p["ylabel"] for p in w.curves_chart.panels] == [
            "<i>loss\\u202e", "<img src=x onerror=alert(2)>"]
        assert "<img" not in w.trials.value and "&lt;b&gt;adam" in w.trials.value
        assert "<u>" not in header and "&lt;u&gt;opt" in header
    finally:
        w.close()


class CrashedTrial:
    """A ``Determined`` stand-in serving trial 3, ended in ERROR with a traceback in its log."""

    username = "admin"

    def get_trial(self, trial_id: int) -> CrashedTrial:
        return self

    def to_dict(self) -> dict[str, Any]:
        return {"id": 3, "experimentId": 1, "state": "STATE_ERROR", "hparams": {}}

    def metrics(self) -> dict[str, list[dict[str, Any]]]:
        return {"training": [report(1, loss=1.0, accuracy=0.5), report(2, loss=0.5, accuracy=0.75)],
                "validation": [report(2, loss=0.75, val_acc=0.7)]}

    def checkpoints(self) -> list[Any]:
        return []

    def log_tail(self, n: int) -> list[str]:
        return ["Traceback (most recent call last):", '  File "train.py", line 3',
                "ZeroDivisionError: division by zero"]


def test_trial_widget_a_chart_per_metric_and_the_crash_reason() -> None:
    w = TrialWidget(3, CrashedTrial(), interval=60)  # type: ignore[arg-type]
    try:
        assert not w.poller.running  # ended: nothing more to poll
        assert "failed: ZeroDivisionError: division by zero" in w.header.value
        panels = {p["title"]: [s["name"] for s in p["series"]] for p in w.chart.panels}
        assert panels == {"accuracy": ["training"], "loss": ["training", "validation"],
                          "val_acc": ["validation"]}
    finally:
        w.close()
