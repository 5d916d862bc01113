"""Plotly ``FigureWidget`` updates that send only what changed, in one message per figure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go


def line_figure(title: str, xlabel: str = "batches", height: int = 300) -> go.FigureWidget:
    fig = go.FigureWidget()
    fig.update_layout(title=title, height=height, margin={"l": 50, "r": 20, "t": 40, "b": 40},
                      xaxis_title=xlabel, legend_title_text="trial")
    return fig


def sync_lines(fig: go.FigureWidget, series: Mapping[str, Mapping[str, list[Any]]],
               mode: str = "lines") -> None:
    """Make ``fig``'s traces exactly ``series`` (``{name: {"x": [...], "y": [...]}}``):
    existing traces are updated in place (one batched message), new ones added, gone ones
    removed. A trace whose points did not change is not touched."""
    names = list(series)
    current = [t.name for t in fig.data]
    if any(n not in series for n in current):
        fig.data = [t for t in fig.data if t.name in series]
        current = [t.name for t in fig.data]
    with fig.batch_update():
        for trace in fig.data:
            s = series[trace.name]
            if list(trace.x or ()) != list(s["x"]) or list(trace.y or ()) != list(s["y"]):
                trace.x, trace.y = list(s["x"]), list(s["y"])
    for name in names:
        if name not in current:
            s = series[name]
            fig.add_scatter(x=list(s["x"]), y=list(s["y"]), name=name, mode=mode)


def parcoords(fig: go.FigureWidget, coords: Mapping[str, Any]) -> None:
    """Show ``hparam_coords(...)`` output as a parallel-coordinates plot, coloured by the
    metric (trials with no metric yet in grey)."""
    dims = []
    for d in coords["dimensions"]:
        dim = {"label": d["label"], "values": [v if v is not None else float("nan")
                                               for v in d["values"]]}
        if "ticktext" in d:
            dim.update(tickvals=d["tickvals"], ticktext=d["ticktext"])
        dims.append(dim)
    color = [c if isinstance(c, (int, float)) else float("nan") for c in coords["color"]]
    line = {"color": color, "colorscale": "Viridis", "showscale": True} if any(
        isinstance(c, (int, float)) for c in coords["color"]) else {"color": "grey"}
    if not fig.data:
        fig.add_parcoords(dimensions=dims, line=line)
        return
    with fig.batch_update():
        fig.data[0].dimensions = dims
        fig.data[0].line = line
