"""The trial view: metrics table and chart, log tail, checkpoints."""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as w

from det_jupyter.client import Determined

from . import _views as v
from ._base import DEFAULT_INTERVAL, LiveWidget
from ._charts import line_chart, panel, set_panels


class TrialWidget(LiveWidget):
    """One trial, live until it ends: a chart per metric (its training and validation
    curves on the metric's own axes), the metrics table, the last ``log_lines`` log lines,
    its checkpoints, and why it crashed if it did."""

    def __init__(self, trial_id: int, det: Determined | None = None, *,
                 interval: float = DEFAULT_INTERVAL, log_lines: int = 40) -> None:
        self.trial_id = int(trial_id)
        self.log_lines = log_lines
        super().__init__(det, interval=interval)

    def _build(self) -> None:
        self.header = w.HTML()
        self.chart = line_chart(height=220)
        self.table = w.HTML()
        self.logs = w.HTML()
        self.checkpoints = w.HTML()
        self.children = [
            self.header, self.chart,
            w.Accordion(children=[self.table, self.logs, self.checkpoints],
                        titles=("Metrics", "Log tail", "Checkpoints")),
            self.status,
        ]

    def _fetch(self) -> dict[str, Any]:
        t = self.det.get_trial(self.trial_id)
        return {"trial": t.to_dict(), **t.metrics(),
                "checkpoints": [c.to_dict() for c in t.checkpoints()],
                "logs": t.log_tail(self.log_lines)}

    def _done(self, data: Any) -> bool:
        return v.state_name(data["trial"].get("state")) in v.TERMINAL

    def _render(self, data: Any) -> None:
        t = data["trial"]
        row = v.trial_rows([t])[0]
        h = v.html_text  # everything from the master is text, never markup
        self.header.value = (
            f"<b>Trial {h(row['id'])}</b> of experiment {h(t.get('experimentId'))} — "
            f"<b>{h(row['state'])}</b> · {h(row['batches'])} batches · metric {h(row['metric'])}"
            f" · restarts {h(row['restarts'])} · {h(row['hparams'])}")
        if v.state_name(t.get("state")) == "ERROR":
            reason = v.crash_reason(data["logs"])
            self.header.value += (f"<br><span style='color:var(--jp-error-color1,#b00)'>failed: "
                                  f"{h(reason or 'see the log tail below')}</span>")
        curves = v.curves({self.trial_id: {"training": data["training"],
                                           "validation": data["validation"]}})
        names = sorted(set(curves["training"]) | set(curves["validation"]))
        set_panels(self.chart, [
            panel(name, {group: curves[group][name][self.trial_id] for group in ("training", "validation")
                         if name in curves[group]}, ylabel=name, mode="lines+markers")
            for name in names] or [panel("metrics", {}, empty="no metrics yet")])
        headers, rows = v.metrics_table(data["training"], data["validation"])
        self.table.value = v.html_table(headers, rows)
        self.logs.value = ("<pre style='max-height:300px;overflow:auto'>"
                           f"{html.escape(v.log_tail(data['logs'], self.log_lines))}</pre>")
        self.checkpoints.value = v.html_table(
            ["UUID", "State", "Batches", "Files", "Reported"],
            [list(r.values()) for r in v.checkpoint_rows(data["checkpoints"])])
