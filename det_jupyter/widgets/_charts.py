"""Our chart widget: line charts in panels (each with its own axes) and parallel coordinates.

A ``Chart`` is an anywidget whose whole picture is synced state (``panels`` or ``coords``),
drawn by ``static/chart.js`` in SVG. So a reloaded page or a re-opened notebook draws every
chart again from the kernel (plotly's ``FigureWidget`` sends its updates as one-off deltas,
which a reload loses), the charts follow the JupyterLab theme (the drawing uses its CSS
variables), and they fill their output's width. Every number goes out as a finite float or
``null``: nothing sends NaN or infinity as JSON. Names are shown as text, with control and
invisible characters made visible.
"""

from __future__ import annotations

import math
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import anywidget
import traitlets

from det_jupyter.names import visible

from ._views import fmt

MAX_POINTS = 2000  # per series sent to the front end; longer ones are thinned evenly


class Chart(anywidget.AnyWidget):
    """``kind`` "lines": ``panels`` is a list of ``{"title", "xlabel", "ylabel", "empty",
    "series": [{"name", "x", "y", "mode", "color"}]}``; "parcoords": ``coords`` is
    ``{"title", "dimensions", "trial_ids", "color", "colorLabel", "empty"}``."""

    _esm = pathlib.Path(__file__).parent / "static" / "chart.js"
    kind = traitlets.Unicode("lines").tag(sync=True)
    panels: traitlets.List[Any] = traitlets.List().tag(sync=True)
    coords = traitlets.Dict().tag(sync=True)
    height = traitlets.Int(260).tag(sync=True)


def number(value: Any) -> float | None:
    """``value`` as a finite float, else ``None`` (JSON ``null``; the chart leaves a gap)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def text(value: Any) -> str:
    return visible(fmt(value))


def thin(xs: Sequence[Any], ys: Sequence[Any], limit: int = MAX_POINTS) -> tuple[list[Any], list[Any]]:
    """At most ``limit`` points, evenly spaced, keeping the first and the last."""
    n = len(xs)
    if n <= limit:
        return list(xs), list(ys)
    keep = sorted({round(i * (n - 1) / (limit - 1)) for i in range(limit)})
    return [xs[i] for i in keep], [ys[i] for i in keep]


def line_chart(height: int = 260) -> Chart:
    return Chart(kind="lines", height=height)


def parcoords_chart(height: int = 320) -> Chart:
    return Chart(kind="parcoords", height=height)


def panel(title: str, series: Mapping[str, Mapping[str, Sequence[Any]]], *, xlabel: str = "batches",
          ylabel: str = "", mode: str = "lines", empty: str = "") -> dict[str, Any]:
    """One panel's wire form from ``{name: {"x": [...], "y": [...]}}`` (in drawing order;
    a series keeps its colour by its place here)."""
    out = []
    for i, (name, s) in enumerate(series.items()):
        xs, ys = thin([number(x) for x in s["x"]], [number(y) for y in s["y"]])
        out.append({"name": text(name), "x": xs, "y": ys, "mode": mode, "color": i})
    return {"title": text(title), "xlabel": text(xlabel), "ylabel": text(ylabel),
            "empty": text(empty), "series": out}


def set_panels(chart: Chart, panels: list[dict[str, Any]]) -> None:
    """Show ``panels`` (from ``panel``); nothing is sent when they did not change."""
    if chart.panels != panels:
        chart.panels = panels


def set_coords(chart: Chart, title: str, coords: Mapping[str, Any], color_label: str = "metric") -> None:
    """Show ``hparam_coords(...)`` output as parallel coordinates, coloured by the metric
    (trials with no metric yet in grey)."""
    dims = []
    for d in coords["dimensions"]:
        dim: dict[str, Any] = {"label": text(d["label"]), "values": [number(v) for v in d["values"]]}
        if "ticktext" in d:
            dim["ticktext"] = [text(x) for x in d["ticktext"]]
        dims.append(dim)
    wire = {"title": text(title), "dimensions": dims, "trial_ids": list(coords["trial_ids"]),
            "color": [number(c) for c in coords["color"]], "colorLabel": text(color_label),
            "empty": "no hyperparameters vary yet"}
    if chart.coords != wire:
        chart.coords = wire
