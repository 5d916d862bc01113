"""Plotly trace syncing and a widget fed by a named test double (no kernel, no master)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("plotly", reason="the widgets need plotly (a product dependency)")

from det_jupyter.widgets import ClusterWidget  # noqa: E402
from det_jupyter.widgets._charts import line_figure, parcoords, sync_lines  # noqa: E402


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


def test_parcoords_categorical_ticks_and_missing_metric() -> None:
    fig = line_figure("hp")
    coords = {"trial_ids": [1, 2], "color": [None, 0.5], "dimensions": [
        {"label": "opt", "values": [0, 1], "tickvals": [0, 1], "ticktext": ["adam", "sgd"]},
        {"label": "loss", "values": [None, 0.5]}]}
    parcoords(fig, coords)
    (trace,) = fig.data
    assert [d.label for d in trace.dimensions] == ["opt", "loss"]
    assert list(trace.dimensions[0].ticktext) == ["adam", "sgd"]
    parcoords(fig, {**coords, "color": [0.1, 0.5]})
    assert len(fig.data) == 1 and list(fig.data[0].line.color) == [0.1, 0.5]


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
