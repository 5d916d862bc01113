"""The experiments list and the experiment view."""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from det_jupyter.client import Determined
from det_jupyter.names import visible

from . import _views as v
from ._base import DEFAULT_INTERVAL, LiveWidget, enable_actions, verb_buttons
from ._charts import line_chart, panel, parcoords_chart, set_coords, set_panels

_STATES = ("ACTIVE", "QUEUED", "RUNNING", "PAUSED", "COMPLETED", "CANCELED", "ERROR")


class ExperimentsWidget(LiveWidget):
    """Experiments with a text filter, a state filter, sorting, and pause / activate / kill
    for the chosen one. ``all_users``: everyone's experiments (default: only yours)."""

    def __init__(self, det: Determined | None = None, *, all_users: bool = False,
                 limit: int | None = None, interval: float = 2.0) -> None:
        self.all_users = all_users
        self.limit = limit
        self._users: list[str] | None = None
        super().__init__(det, interval=interval)

    def _build(self) -> None:
        self.filter = w.Text(placeholder="filter: id, name or owner", layout=w.Layout(width="220px"))
        self.states = w.SelectMultiple(options=_STATES, rows=3, description="state",
                                       layout=w.Layout(width="260px"))
        self.sort = w.Dropdown(options=v.EXPERIMENT_SORT_KEYS, value="id", description="sort",
                               layout=w.Layout(width="160px"))
        self.descending = w.Checkbox(value=True, description="descending", indent=False)
        self.table = w.HTML()
        self.selected = w.Dropdown(options=[], description="experiment",
                                   layout=w.Layout(width="260px"))
        self.buttons = verb_buttons(self, lambda: self.det.get_experiment(self.selected.value),
                                    lambda: f"experiment {self.selected.value}")
        for control in (self.filter, self.states, self.sort, self.descending):
            control.observe(self._locked(lambda: self._render(self.data)), names="value")
        self.selected.observe(self._locked(self._enable), names="value")
        self.children = [
            w.HBox([self.filter, self.states, self.sort, self.descending]), self.table,
            w.HBox([self.selected, *self.buttons.values()]), self.confirm, self.status,
        ]

    def _fetch(self) -> list[dict[str, Any]]:
        if self._users is None:
            self._users = [] if self.all_users else [self.det.username or self.det.whoami()["username"]]
        return [e.to_dict() for e in self.det.list_experiments(users=self._users, limit=self.limit)]

    def rows(self) -> list[dict[str, Any]]:
        return v.experiment_rows(self.data or [], text=self.filter.value,
                                 states=self.states.value, sort=self.sort.value,
                                 descending=self.descending.value)

    def _render(self, data: Any) -> None:
        rows = self.rows()
        self.table.value = v.html_table(
            ["ID", "Name", "Owner", "State", "Progress", "Trials", "Best", "Start"],
            [[r["id"], r["name"], r["owner"], r["state"], v.progress_text(r["progress"]),
              r["trials"], r["best"], r["start"]] for r in rows])
        options = [(f"{r['id']} {visible(r['name'])}", r["id"]) for r in rows]
        if options != list(self.selected.options):
            keep = self.selected.value
            self.selected.options = options
            if keep in [o[1] for o in options]:
                self.selected.value = keep
        self._enable()

    def _enable(self) -> None:
        row = next((r for r in self.rows() if r["id"] == self.selected.value), None)
        enable_actions(self.buttons, row["actions"] if row else [])


class ExperimentWidget(LiveWidget):
    """One experiment, live: state and progress, best trial, training and validation curves
    per trial, ASHA rungs, hyperparameters in parallel coordinates, the trials and why
    failed ones crashed; pause / activate / kill (after a confirmation). Polling stops once
    the experiment has ended."""

    def __init__(self, experiment_id: int, det: Determined | None = None, *,
                 interval: float = DEFAULT_INTERVAL) -> None:
        self.experiment_id = int(experiment_id)
        self._finished: dict[int, dict[str, Any]] = {}  # metrics of ended trials: fetched once
        self._curves: dict[str, Any] = {"training": {}, "validation": {}}
        self._crashes: dict[int, str | None] = {}  # why each failed trial crashed: read once
        self._choosing = False  # _render is setting the metric dropdowns
        super().__init__(det, interval=interval)

    def _build(self) -> None:
        self.header = w.HTML()
        self.buttons = verb_buttons(self, lambda: self.det.get_experiment(self.experiment_id),
                                    lambda: f"experiment {self.experiment_id}")
        self.train_metric = w.Dropdown(options=[], description="training")
        self.val_metric = w.Dropdown(options=[], description="validation")
        self.curves_chart = line_chart()
        self.coords_chart = parcoords_chart()
        self.crashes = w.HTML()
        self.rungs = w.HTML()
        self.trials = w.HTML()
        for dd in (self.train_metric, self.val_metric):
            dd.observe(self._locked(self._metric_chosen), names="value")
        self.children = [
            self.header, self.crashes, w.HBox(list(self.buttons.values())), self.confirm,
            w.HBox([self.train_metric, self.val_metric]),
            self.curves_chart, self.rungs, self.coords_chart, self.trials,
            self.status,
        ]

    def _fetch(self) -> dict[str, Any]:
        exp = self.det.get_experiment(self.experiment_id)  # one GET, fresh
        trials = exp.trials()
        metrics: dict[int, dict[str, Any]] = {}
        for t in trials:
            if t.id in self._finished:
                metrics[t.id] = self._finished[t.id]
                continue
            m = t.metrics()
            if t.state in v.TERMINAL:
                self._finished[t.id] = m
            metrics[t.id] = m
            if t.state == "ERROR" and t.id not in self._crashes:
                self._crashes[t.id] = v.crash_reason(t.log_tail(80))
        return {"experiment": exp.to_dict(), "trials": [t.to_dict() for t in trials],
                "metrics": metrics, "crashes": dict(self._crashes)}

    def _done(self, data: Any) -> bool:
        return v.state_name(data["experiment"].get("state")) in v.TERMINAL

    def _render(self, data: Any) -> None:
        e = data["experiment"]
        cfg = e.get("config") or {}
        searcher = cfg.get("searcher") or {}
        smaller = bool(searcher.get("smaller_is_better", True))
        best = v.best_trial(data["trials"], smaller)
        row = v.experiment_row(e)
        h = v.html_text  # everything from the master is text, never markup
        best_text = (f"best trial {h(best['id'])}: {h(searcher.get('metric'))} = {h(best['value'])}"
                     f" {h(best['hparams'])}" if best else "no validation yet")
        self.header.value = (
            f"<b>Experiment {h(row['id'])}</b> {h(row['name'])} — <b>{h(row['state'])}</b>"
            f" · progress {h(v.progress_text(row['progress']))} · {h(row['trials'])} trial(s) · "
            f"{h(searcher.get('name'))} · {best_text}")
        enable_actions(self.buttons, row["actions"])
        crashed = sorted(data.get("crashes", {}).items())
        self.crashes.value = "".join(
            f"<div style='color:var(--jp-error-color1,#b00)'>trial {h(tid)} failed: "
            f"{h(reason or 'no traceback in its log (det trial logs ' + str(tid) + ')')}</div>"
            for tid, reason in crashed[:5]) + (f"<div>… and {len(crashed) - 5} more</div>"
                                               if len(crashed) > 5 else "")
        self._curves = v.curves(data["metrics"])
        # New options make a Dropdown jump to its first one: drawing at each such step would
        # flash another metric (or empty axes) between two polls, so draw once at the end.
        self._choosing = True
        try:
            for dd, group in ((self.train_metric, "training"), (self.val_metric, "validation")):
                names = sorted(self._curves[group])
                preferred = searcher.get("metric") if group == "validation" else "loss"
                choice = v.metric_choice(names, dd.value, preferred)
                if list(dd.options) != names:
                    dd.options = names
                if dd.value != choice:
                    dd.value = choice
        finally:
            self._choosing = False
        self._draw_curves()
        rungs = v.asha_rungs(searcher, data["trials"], {tid: m["validation"] for tid, m in
                                                          data["metrics"].items()})
        self.rungs.value = ("<b>ASHA rungs</b>" + v.html_table(
            ["Rung", searcher.get("time_metric") or "batches", "Reached", "Stopped here",
             "Running", "Best"],
            [[r["rung"], r["units"], _ids(r["reached"]), _ids(r["stopped"]), _ids(r["running"]),
              r["best"]] for r in rungs])) if rungs else ""
        metric = searcher.get("metric") or "metric"
        set_coords(self.coords_chart, "hyperparameters", v.hparam_coords(data["trials"], metric), metric)
        self.trials.value = v.html_table(
            ["Trial", "State", "Batches", "Metric", "Restarts", "Hyperparameters"],
            [list(r.values()) for r in v.trial_rows(data["trials"])])

    def _metric_chosen(self) -> None:
        """The user picked another metric (``_render`` draws its own changes)."""
        if not self._choosing:
            self._draw_curves()

    def _draw_curves(self) -> None:
        panels = []
        for dd, group in ((self.train_metric, "training"), (self.val_metric, "validation")):
            per_trial = self._curves[group].get(dd.value) or {}
            panels.append(panel(group, {f"trial {tid}": pts for tid, pts in per_trial.items()},
                                ylabel=dd.value or "",
                                mode="lines" if group == "training" else "lines+markers",
                                empty=f"no {group} metrics yet"))
        set_panels(self.curves_chart, panels)


def _ids(ids: list[int]) -> str:
    return ", ".join(str(i) for i in ids)
