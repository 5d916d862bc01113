"""Plotly trace syncing and a widget fed by a named test double (no kernel, no master)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("plotly", reason="the widgets need plotly (a product dependency)")

from det_jupyter.widgets import ClusterWidget, ExperimentWidget  # noqa: E402
from det_jupyter.widgets._charts import (  # noqa: E402
    chart_row,
    line_figure,
    parcoords,
    parcoords_figure,
    sync_lines,
)


def traces(fig: Any) -> dict[str, tuple[list[Any], list[Any]]]:
    return {t.name: (list(t.x), list(t.y)) for t in fig.data}


def test_sync_lines_updates_adds_and_removes_traces() -> None:
    fig = line_figure("t")
    sync_lines(fig, {"trial 1": {"x": [1], "y": [0.5]}})
    first = fig.data[0]
    sync_lines(fig, {"trial 1": {"x": [1, 2], "y": [0.5, 0.25]}, "trial 2": {"x": [1], "y": [1.0]}})
    assert fig.data[0] is first  # updated in place, not replaced
    assert traces(fig) == {"trial 1": ([1, 2], [0.5, 0.25]), "trial 2": ([1], [1.0])}
    sync_lines(fig, {"trial 2": {"x": [1, 2], "y": [1.0, 0.9]}})
    assert traces(fig) == {"trial 2": ([1, 2], [1.0, 0.9])}


def test_sync_lines_writes_a_note_across_empty_axes() -> None:
    fig = line_figure("validation")
    sync_lines(fig, {}, empty="no validation metrics yet")
    assert [a.text for a in fig.layout.annotations] == ["no validation metrics yet"]
    sync_lines(fig, {"trial 1": {"x": [4], "y": [0.25]}}, empty="no validation metrics yet")
    assert not fig.layout.annotations and traces(fig) == {"trial 1": ([4], [0.25])}


def test_chart_row_wraps_and_scrolls_instead_of_clipping() -> None:
    row = chart_row(line_figure("a"), line_figure("b"))
    assert row.layout.flex_flow == "row wrap" and row.layout.overflow == "auto"
    assert len(row.children) == 2


def test_parcoords_title_sits_above_the_axis_labels() -> None:
    fig = parcoords_figure("hyperparameters")
    # plotly draws each axis' label and top range tick ~20-35 px above the axes: the margin
    # holds them and the title sits at the figure's top edge, clear of them.
    assert fig.layout.margin.t >= 90
    assert (fig.layout.title.text, fig.layout.title.y, fig.layout.title.yref,
            fig.layout.title.yanchor) == ("hyperparameters", 1, "container", "top")


def test_parcoords_categorical_ticks_and_missing_metric() -> None:
    fig = line_figure("hp")
    coords = {"trial_ids": [1, 2], "color": [None, 0.5], "dimensions": [
        {"label": "opt", "values": [0, 1], "tickvals": [0, 1], "ticktext": ["adam", "sgd"]},
        {"label": "loss", "values": [None, 0.5]}]}
    parcoords(fig, coords)
    (trace,) = fig.data
    assert [d.label for d in trace.dimensions] == ["opt", "loss"]
    assert list(trace.dimensions[0].ticktext) == ["adam", "sgd"]
    assert trace.line.showscale is False  # one metric value: no scale to show
    parcoords(fig, {**coords, "color": [0.1, 0.5]})
    assert len(fig.data) == 1 and list(fig.data[0].line.color) == [0.1, 0.5]
    assert fig.data[0].line.showscale is True


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
        assert [a.text for a in w.val_fig.layout.annotations] == ["no validation metrics yet"]
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
            assert list(w.val_fig.data[0].y) == [r["metrics"]["validation_loss"] for r in validation]
            assert not w.val_fig.layout.annotations
        assert list(w.val_metric.options) == ["accuracy", "batches", "validation_loss"]
        w.draws = []
        w.val_metric.value = "accuracy"  # the user's choice still redraws at once
        assert w.draws == [("loss", "accuracy")] and list(w.val_fig.data[0].y) == [0.9]
    finally:
        w.close()


def test_plotly_text_from_the_master_is_escaped() -> None:
    fig = line_figure("<b>title</b>")
    assert fig.layout.title.text == "&lt;b&gt;title&lt;/b&gt;"
    sync_lines(fig, {"training.<a href='http://evil'>x</a>": {"x": [1], "y": [1.0]}})
    sync_lines(fig, {"training.<a href='http://evil'>x</a>": {"x": [1, 2], "y": [1.0, 2.0]}})
    assert traces(fig) == {"training.&lt;a href='http://evil'&gt;x&lt;/a&gt;": ([1, 2], [1.0, 2.0])}
    sync_lines(fig, {}, empty="no <i>metrics</i>")
    assert [a.text for a in fig.layout.annotations] == ["no &lt;i&gt;metrics&lt;/i&gt;"]
    parcoords(fig, {"trial_ids": [1], "color": [None], "dimensions": [
        {"label": "<br>lr\u202e", "values": [0], "tickvals": [0], "ticktext": ["<b>adam\u202e"]}]})
    (coords,) = fig.data
    assert coords.dimensions[0].label == "&lt;br&gt;lr\\u202e"
    assert list(coords.dimensions[0].ticktext) == ["<b>adam\\u202e"]  # plotly shows it as text


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
        assert w.train_fig.layout.yaxis.title.text == "&lt;i&gt;loss\\u202e"
        assert w.val_fig.layout.yaxis.title.text == "&lt;img src=x onerror=alert(2)&gt;"
        assert "<img" not in w.trials.value and "&lt;b&gt;adam" in w.trials.value
        assert "<u>" not in header and "&lt;u&gt;opt" in header
    finally:
        w.close()
