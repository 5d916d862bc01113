"""Plotly ``FigureWidget`` updates that send only what changed, in one message per figure.

Titles, trace names and axis labels go through ``plot_text``: plotly reads them as its own
small HTML, and metric and hyperparameter names come from the user's code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ipywidgets as w
import plotly.graph_objects as go

from det_jupyter.names import visible

from ._views import plot_text


def line_figure(title: str, xlabel: str = "batches", height: int = 300) -> go.FigureWidget:
    """A line chart. No width: plotly's default (700 px), as a ``FigureWidget`` does not
    follow its container's width; put two side by side in ``chart_row`` so they wrap."""
    fig = go.FigureWidget()
    fig.update_layout(title=plot_text(title), height=height, margin={"l": 50, "r": 20, "t": 40, "b": 40},
                      xaxis_title=xlabel, legend_title_text="trial")
    return fig


def parcoords_figure(title: str, height: int = 340) -> go.FigureWidget:
    """An empty figure for ``parcoords``: the title at the very top of a top margin tall
    enough for the axis labels and range ticks that plotly draws above the axes."""
    fig = go.FigureWidget()
    fig.update_layout(title={"text": plot_text(title), "y": 1, "yref": "container", "yanchor": "top",
                             "pad": {"t": 8}},
                      height=height, margin={"l": 60, "r": 40, "t": 100, "b": 30})
    return fig


def chart_row(*charts: Any) -> w.Box:
    """Charts side by side where the output is wide enough, else one below the other (they
    wrap); a chart wider than the output scrolls instead of being cut off."""
    return w.HBox(list(charts), layout=w.Layout(flex_flow="row wrap", overflow="auto"))


def sync_lines(fig: go.FigureWidget, series: Mapping[str, Mapping[str, list[Any]]],
               mode: str = "lines", empty: str = "") -> None:
    """Make ``fig``'s traces exactly ``series`` (``{name: {"x": [...], "y": [...]}}``):
    existing traces are updated in place (one batched message), new ones added, gone ones
    removed. A trace whose points did not change is not touched. With no series, ``empty``
    (if given) is written across the axes, so they do not look like a failed update. Trace
    names are ``plot_text(name)`` (the same for a plain name)."""
    series = {plot_text(name): s for name, s in series.items()}
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
    note = plot_text(empty) if not series else ""
    if [a.text for a in fig.layout.annotations] != ([note] if note else []):
        fig.layout.annotations = [_note(note)] if note else []


def _note(text: str) -> dict[str, Any]:
    return {"text": text, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5,
            "showarrow": False, "font": {"color": "#888"}}


def parcoords(fig: go.FigureWidget, coords: Mapping[str, Any]) -> None:
    """Show ``hparam_coords(...)`` output as a parallel-coordinates plot, coloured by the
    metric (trials with no metric yet in grey)."""
    dims = []
    for d in coords["dimensions"]:
        dim = {"label": plot_text(d["label"]), "values": [v if v is not None else float("nan")
                                               for v in d["values"]]}
        if "ticktext" in d:
            # plotly shows tick text as plain text (no markup to escape), so only made visible
            dim.update(tickvals=d["tickvals"], ticktext=[visible(str(x)) for x in d["ticktext"]])
        dims.append(dim)
    color = [c if isinstance(c, (int, float)) else float("nan") for c in coords["color"]]
    known = {c for c in coords["color"] if isinstance(c, (int, float))}
    # One value has no scale to show (plotly would label it ±0.5 around nothing).
    line = {"color": color, "colorscale": "Viridis", "showscale": len(known) > 1} if known \
        else {"color": "grey"}
    if not fig.data:
        fig.add_parcoords(dimensions=dims, line=line)
        return
    with fig.batch_update():
        fig.data[0].dimensions = dims
        fig.data[0].line = line
