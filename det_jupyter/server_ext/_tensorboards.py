"""/api/v1/tensorboards: ``det tensorboard start|list|open|kill`` (TensorBoard as a task over
trials' stored metrics, reached through ``/proxy/{id}/``)."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest
from ..services import tensorboards
from ..services.job_control import QueueUpdate
from ._base import DetHandler
from ._notebooks import launch_request, launch_warnings, listed, notebook_json

KIND = tensorboards.KIND


def tensorboard_json(row: Any, ready: bool) -> dict[str, Any]:
    """A ``v1Tensorboard``: a notebook's fields (state, proxy path, why it ended) and its
    experiments and trials."""
    out = notebook_json(row, ready)
    out.pop("notebookIdleType", None)
    cfg = row.config or {}
    out["experimentIds"] = list(cfg.get("experiment_ids") or [])
    out["trialIds"] = list(cfg.get("trial_ids") or [])
    return out


def _ids(body: dict[str, Any], key: str) -> list[Any]:
    value = body.get(key) or []
    if not isinstance(value, list):
        raise InvalidRequest(f"{key} must be a list of ids")
    return value


class TensorboardsHandler(DetHandler):
    def get(self) -> None:
        rows = listed(self, KIND)
        ready = self.master.notebooks.ready
        self.send({"tensorboards": [tensorboard_json(r, r.task_id in ready) for r in rows]})

    def post(self) -> None:
        """``v1LaunchTensorboardRequest``: ``experimentIds``, ``trialIds``, ``config``, ``files``."""
        body = self.body_json()
        config, files = launch_request(self, "the TensorBoard's")
        config = tensorboards.prepare(self.master.views, config, _ids(body, "experimentIds"),
                                      _ids(body, "trialIds"))
        row = self.master.commands.launch(self.user, config, files, kind=KIND)
        warnings = launch_warnings(self, row)
        self.send({"tensorboard": tensorboard_json(row, False), "config": row.config,
                   "warnings": warnings,
                   "ticket": self.master.notebooks.ticket(self.user, row.task_id, KIND)})


class TensorboardHandler(DetHandler):
    def get(self, task_id: str) -> None:
        row = self.master.notebooks.visible(self.user, task_id, KIND)
        self.send({"tensorboard": tensorboard_json(row, task_id in self.master.notebooks.ready),
                   "config": row.config,
                   "ticket": self.master.notebooks.ticket(self.user, task_id, KIND)})


class TensorboardKillHandler(DetHandler):
    def post(self, task_id: str) -> None:
        self.master.notebooks.visible(self.user, task_id, KIND)
        self.master.commands.kill(self.user, task_id, KIND)  # owner or admin: checked above
        row = self.master.commands.get(task_id, KIND)
        self.send({"tensorboard": tensorboard_json(row, False)})


class TensorboardPriorityHandler(DetHandler):
    """Changes when it starts; once running it is not preempted."""

    def post(self, task_id: str) -> None:
        body = self.body_json()
        row = self.master.notebooks.visible(self.user, task_id, KIND)
        self.master.jobs.update(self.user, [QueueUpdate(row.job_id, priority=body.get("priority"))],
                                strict=False)
        row = self.master.commands.get(task_id, KIND)
        self.send({"tensorboard": tensorboard_json(row, task_id in self.master.notebooks.ready)})
