"""The job queue, and the cluster's agents and slots (the model registry: ``_registry``)."""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from det_jupyter.client import Determined
from det_jupyter.names import visible

from . import _views as v
from ._base import LiveWidget


class JobQueueWidget(LiveWidget):
    """A pool's queue in order: position, state, slots, why a job waits; change the chosen
    job's priority or weight, or move it one place ahead / behind (``POST /api/v1/job-queues``)."""

    def __init__(self, det: Determined | None = None, *, resource_pool: str | None = None,
                 interval: float = 2.0) -> None:
        self.resource_pool = resource_pool
        super().__init__(det, interval=interval)

    def _build(self) -> None:
        self.table = w.HTML()
        self.job = w.Dropdown(options=[], description="job", layout=w.Layout(width="320px"))
        self.priority = w.BoundedIntText(value=42, min=1, max=99, description="priority",
                                         layout=w.Layout(width="160px"))
        self.weight = w.BoundedFloatText(value=1.0, min=0.0, max=1e6, description="weight",
                                         layout=w.Layout(width="160px"))
        set_priority = w.Button(description="Set priority", layout=w.Layout(width="100px"))
        set_weight = w.Button(description="Set weight", layout=w.Layout(width="100px"))
        ahead = w.Button(description="Move ahead", icon="arrow-up", layout=w.Layout(width="110px"))
        behind = w.Button(description="Move behind", icon="arrow-down", layout=w.Layout(width="120px"))
        set_priority.on_click(self._act("priority", lambda: self.det.update_job(
            self.job.value, priority=self.priority.value)))
        set_weight.on_click(self._act("weight", lambda: self.det.update_job(
            self.job.value, weight=self.weight.value)))
        ahead.on_click(self._act("move ahead", lambda: self._move("up")))
        behind.on_click(self._act("move behind", lambda: self._move("down")))
        self.job.observe(self._locked(self._show_job), names="value")
        self.children = [self.table, w.HBox([self.job, ahead, behind]),
                         w.HBox([self.priority, set_priority, self.weight, set_weight]), self.status]

    def _fetch(self) -> list[dict[str, Any]]:
        return v.job_rows(self.det.list_jobs(self.resource_pool))

    def _move(self, direction: str) -> None:
        update = v.queue_move(self.data or [], self.job.value, direction)
        if update is None:
            self._error(f"job {self.job.value} is already {'first' if direction == 'up' else 'last'}")
            return
        self.det.update_job(update["jobId"], ahead_of=update.get("aheadOf"),
                            behind_of=update.get("behindOf"))

    def _render(self, rows: list[dict[str, Any]]) -> None:
        self.table.value = v.html_table(
            ["#", "Job", "Type", "Name", "State", "Ahead", "Priority", "Weight", "Slots", "User",
             "Why waiting"],
            [[r["position"], r["job_id"], r["type"], r["name"], r["state"], r["jobs_ahead"],
              r["priority"], r["weight"], r["slots"], r["user"], r["wait_reason"]] for r in rows])
        options = [(visible(f"#{r['position']} {v.fmt(r['name'])} ({r['job_id']})"), r["job_id"])
                   for r in rows]
        if options != list(self.job.options):
            keep = self.job.value
            self.job.options = options
            if keep in [o[1] for o in options]:
                self.job.value = keep

    def _show_job(self) -> None:
        row = next((r for r in self.data or [] if r["job_id"] == self.job.value), None)
        if row and isinstance(row["priority"], int):
            self.priority.value = row["priority"]
        if row and isinstance(row["weight"], (int, float)):
            self.weight.value = float(row["weight"])


class ClusterWidget(LiveWidget):
    """Agents and their slots: device, enabled, busy, GPU utilisation and memory (when the
    agent reports them)."""

    def __init__(self, det: Determined | None = None, *, interval: float = 2.0) -> None:
        super().__init__(det, interval=interval)

    def _build(self) -> None:
        self.summary = w.HTML()
        self.table = w.HTML()
        self.children = [self.summary, self.table, self.status]

    def _fetch(self) -> list[dict[str, Any]]:
        return self.det.list_agents()

    def _render(self, agents: list[dict[str, Any]]) -> None:
        s = v.cluster_summary(agents)
        h = v.html_text
        self.summary.value = (f"<b>{h(s['agents'])}</b> agent(s) · <b>{h(s['slots'])}</b> slot(s) · "
                              f"{h(s['busy'])} busy · {h(s['disabled'])} disabled")
        self.table.value = v.html_table(
            ["Agent", "Pool", "Slot", "Type", "Device", "Enabled", "Busy", "GPU %", "Memory"],
            [list(r.values()) for r in v.slot_rows(agents)])
