"""/api/v1/notebooks: ``det notebook start|list|open|kill|set priority`` (JupyterLab as a task,
reached through ``/proxy/{id}/``)."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest
from ..services.job_control import QueueUpdate
from ._base import DetHandler
from ._commands import command_json


def notebook_json(row: Any, ready: bool) -> dict[str, Any]:
    """A ``v1Notebook``: a command's fields, the proxy path, and whether it answers yet."""
    out = command_json(row)
    out["serviceAddress"] = f"/proxy/{row.task_id}/"
    if out["state"] == "STATE_RUNNING" and not ready:
        out["state"] = "STATE_STARTING"  # placed, JupyterLab not answering yet
    if row.end_time is not None and (row.exit_reason or "").startswith("culled"):
        out["exitStatus"] = row.exit_reason  # why it ended matters more than its exit code
    cfg = row.config or {}
    out["idleTimeout"] = cfg.get("idle_timeout")
    out["notebookIdleType"] = cfg.get("notebook_idle_type")
    return out


def listed(handler: DetHandler, kind: str) -> list[Any]:
    """The caller's tasks of ``kind`` (everyone's for an admin), filtered by ``?users=``."""
    user = handler.user
    rows = handler.master.commands.list(None if user.admin else user, kind=kind)
    wanted = set(handler.get_query_arguments("users"))
    return [r for r in rows if not wanted or r.username in wanted]


def launch_request(handler: DetHandler, what: str) -> tuple[dict[str, Any], list[Any]]:
    """A launch body's ``config`` and ``files`` (the context), each checked; ``what`` names
    the kind in the errors ("the notebook's")."""
    body = handler.body_json()
    files = body.get("files") or []
    if not isinstance(files, list):
        raise InvalidRequest(f"files must be a list of files ({what} context)")
    if body.get("templateName"):
        raise InvalidRequest("config templates are not supported yet; pass the full config")
    config = body.get("config") or {}
    if not isinstance(config, dict):
        raise InvalidRequest(f"config must be an object ({what} task config)")
    return config, files


def launch_warnings(handler: DetHandler, row: Any) -> list[str]:
    """The launch warnings of a task's row (more slots than its pool has)."""
    res = row.config["resources"]
    return handler.master.rm.launch_warnings(res["resource_pool"], res["slots"])


class NotebooksHandler(DetHandler):
    def get(self) -> None:
        rows = listed(self, "NOTEBOOK")
        ready = self.master.notebooks.ready
        self.send({"notebooks": [notebook_json(r, r.task_id in ready) for r in rows]})

    def post(self) -> None:
        config, files = launch_request(self, "the notebook's")
        row = self.master.commands.launch(self.user, config, files, kind="NOTEBOOK")
        self.send({"notebook": notebook_json(row, False), "config": row.config,
                   "warnings": launch_warnings(self, row),
                   "ticket": self.master.notebooks.ticket(self.user, row.task_id)})


class NotebookHandler(DetHandler):
    def get(self, task_id: str) -> None:
        row = self.master.notebooks.visible(self.user, task_id)
        self.send({"notebook": notebook_json(row, task_id in self.master.notebooks.ready),
                   "config": row.config,
                   "ticket": self.master.notebooks.ticket(self.user, task_id)})


class NotebookKillHandler(DetHandler):
    def post(self, task_id: str) -> None:
        self.master.notebooks.visible(self.user, task_id)
        self.master.commands.kill(self.user, task_id, "NOTEBOOK")  # owner or admin: checked above
        self.master.notebooks.drop(task_id)
        row = self.master.commands.get(task_id, "NOTEBOOK")
        self.send({"notebook": notebook_json(row, False)})


class NotebookPriorityHandler(DetHandler):
    """``det notebook set priority``: changes when it starts; once running it is not preempted."""

    def post(self, task_id: str) -> None:
        body = self.body_json()
        row = self.master.notebooks.visible(self.user, task_id)
        self.master.jobs.update(self.user, [QueueUpdate(row.job_id, priority=body.get("priority"))],
                                strict=False)
        row = self.master.commands.get(task_id, "NOTEBOOK")
        self.send({"notebook": notebook_json(row, task_id in self.master.notebooks.ready)})
