"""/api/v1/tensorboards: ``det tensorboard start|list|open|kill`` (TensorBoard as a task over
trials' stored metrics, reached through ``/proxy/{id}/``)."""

from __future__ import annotations

from typing import Any

from ..services.access.authz import Perm
from ..services.interactive import tensorboards
from ._api import api, array, integer, obj, service_checked, users
from ._base import CONTEXT_HINT, MAX_BODY, DetHandler
from ._notebooks import (
    kill_proxied,
    launch_request,
    launch_warnings,
    listed,
    notebook_json,
    set_proxied_priority,
    task_proxy_url,
)
from ._wire import LAUNCH, PRIORITY

KIND = tensorboards.KIND


def tensorboard_json(row: Any, ready: bool, proxy_url: str | None = None) -> dict[str, Any]:
    """A ``v1Tensorboard``: a notebook's fields (state, proxy path, why it ended) and its
    experiments and trials."""
    out = notebook_json(row, ready, proxy_url)
    out.pop("notebookIdleType", None)
    cfg = row.config or {}
    out["experimentIds"] = list(cfg.get("experiment_ids") or [])
    out["trialIds"] = list(cfg.get("trial_ids") or [])
    return out


def _ids(body: dict[str, Any], key: str) -> list[Any]:
    return body.get(key) or []


_IDS = array(integer(1), 1000)


class TensorboardsHandler(DetHandler):
    max_body = MAX_BODY
    too_large_hint = CONTEXT_HINT
    permissions = {"GET": Perm.VIEW_NSC, "POST": Perm.CREATE_NSC}

    @api(query=[users()])
    def get(self) -> None:
        rows = listed(self, KIND)
        ready = self.master.notebooks.ready
        self.send({"tensorboards": [tensorboard_json(r, r.task_id in ready, task_proxy_url(self, r.task_id))
                                    for r in rows]})

    @api(body={**obj(experimentIds=_IDS, trialIds=_IDS, **LAUNCH["properties"]), "anyOf": [service_checked(
        {"required": [key], "properties": {key: {"minItems": 1}}}) for key in ("experimentIds", "trialIds")]})
    def post(self) -> None:
        """``v1LaunchTensorboardRequest``: ``experimentIds``, ``trialIds``, ``config``, ``files``."""
        body = self.body_json()
        config, files, workspace = launch_request(self, "the TensorBoard's")
        exp_ids, trial_ids = _ids(body, "experimentIds"), _ids(body, "trialIds")
        for eid in exp_ids:  # it will read their metrics: the caller must see them
            if isinstance(eid, int):
                self.authorize_experiment(eid, Perm.VIEW_EXPERIMENT_ARTIFACTS)
        for tid in trial_ids:
            if isinstance(tid, int):
                self.authorize_trial(tid, Perm.VIEW_EXPERIMENT_ARTIFACTS)
        config = tensorboards.prepare(self.master.views, config, exp_ids, trial_ids)
        row = self.master.commands.launch(self.user, config, files, kind=KIND, workspace_id=workspace)
        warnings = launch_warnings(self, row)
        self.send({"tensorboard": tensorboard_json(row, False, task_proxy_url(self, row.task_id)),
                   "config": row.config, "warnings": warnings,
                   "ticket": self.master.notebooks.ticket(self.user, row.task_id, KIND)})


class TensorboardHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_NSC}

    @api()
    def get(self, task_id: str) -> None:
        self.authorize_task(task_id)
        row = self.master.notebooks.visible(self.user, task_id, KIND)
        self.send({"tensorboard": tensorboard_json(row, task_id in self.master.notebooks.ready,
                                                   task_proxy_url(self, task_id)),
                   "config": row.config,
                   "ticket": self.master.notebooks.ticket(self.user, task_id, KIND)})


class TensorboardKillHandler(DetHandler):
    permissions = {"POST": Perm.UPDATE_NSC}

    @api()
    def post(self, task_id: str) -> None:
        row = kill_proxied(self, task_id, KIND)
        self.send({"tensorboard": tensorboard_json(row, False)})


class TensorboardPriorityHandler(DetHandler):
    """Changes when it starts; once running it is not preempted."""

    permissions = {"POST": Perm.UPDATE_NSC}

    @api(body=PRIORITY)
    def post(self, task_id: str) -> None:
        row = set_proxied_priority(self, task_id, KIND)
        self.send({"tensorboard": tensorboard_json(row, task_id in self.master.notebooks.ready)})
