"""/api/v1/notebooks: ``det notebook start|list|open|kill|set priority`` (JupyterLab as a task,
reached through ``/proxy/{id}/``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ..errors import InvalidRequest
from ..services.access.authz import Perm
from ..services.jobs.control import QueueUpdate
from ._api import BOOL, api, echo, obj, string, users
from ._base import CONTEXT_HINT, MAX_BODY, DetHandler
from ._commands import command_json
from ._wire import LAUNCH, PRIORITY


def notebook_json(row: Any, ready: bool, proxy_url: str | None = None) -> dict[str, Any]:
    """A ``v1Notebook``: a command's fields, the proxy path, and whether it answers yet.
    ``serviceAddress`` stays the path Determined's client joins to the master's URL (the
    master redirects it); ``proxyUrl`` is the absolute address on the proxy's own origin."""
    out = command_json(row)
    out["serviceAddress"] = f"/proxy/{row.task_id}/"
    if proxy_url is not None:
        out["proxyUrl"] = proxy_url
    if out["state"] == "STATE_RUNNING" and not ready:
        out["state"] = "STATE_STARTING"  # placed, JupyterLab not answering yet
    if row.end_time is not None and (row.exit_reason or "").startswith("culled"):
        out["exitStatus"] = row.exit_reason  # why it ended matters more than its exit code
    cfg = row.config or {}
    out["idleTimeout"] = cfg.get("idle_timeout")
    out["notebookIdleType"] = cfg.get("notebook_idle_type")
    return out


def task_proxy_url(handler: DetHandler, task_id: str) -> str | None:
    """The task's address on the proxy's origin, named by the hostname the caller used to reach
    the master (None while the proxy is not listening)."""
    origin = handler.master.notebooks.proxy_origin
    return origin.task_url(task_id, handler.request.headers.get("Host")) if origin is not None else None


def listed(handler: DetHandler, kind: str, *, owner_only: bool = True) -> list[Any]:
    """Tasks of ``kind`` in workspaces where the caller has VIEW_NSC, filtered by ``?users=``;
    for the proxied kinds (``owner_only``) only the caller's own (everyone's for an admin)."""
    user = handler.user
    rows = handler.master.commands.list(None if (user.admin or not owner_only) else user, kind=kind)
    spaces = handler.visible_workspaces(Perm.VIEW_NSC)
    wanted = set(handler.get_query_arguments("users"))
    return [r for r in rows if (not wanted or r.username in wanted)
            and (spaces is None or r.workspace_id in spaces)]


def launch_workspace(handler: DetHandler, body: dict[str, Any]) -> int:
    """The workspace a task is launched into (``workspaceId``, default Uncategorized), once
    the caller may create tasks there."""
    ws = body.get("workspaceId") or 1
    handler.authorize_workspace(ws, Perm.CREATE_NSC)
    return ws


def launch_request(handler: DetHandler, what: str) -> tuple[dict[str, Any], list[Any], int]:
    """A launch body's ``config``, ``files`` (the context) and workspace, each checked;
    ``what`` names the kind in the errors ("the notebook's")."""
    body = handler.body_json()
    workspace = launch_workspace(handler, body)
    files = body.get("files") or []
    config = body.get("config") or {}
    from ._templates import expand_config, launch_template_name

    template = launch_template_name(body)
    if template is not None:  # the merged config is what the task stores
        config = expand_config(handler, template, config)
    return config, files, workspace


def launch_warnings(handler: DetHandler, row: Any) -> list[str]:
    """The launch warnings of a task's row (more slots than its pool has)."""
    res = row.config["resources"]
    return handler.master.rm.launch_warnings(res["resource_pool"], res["slots"])


def kill_proxied(handler: DetHandler, task_id: str, kind: str) -> Any:
    """End a notebook, TensorBoard or shell (UPDATE_NSC on its workspace, and its owner or an
    admin); returns its row afterwards. The proxy stops routing to it first."""
    handler.authorize_task(task_id)
    row = handler.master.notebooks.visible(handler.user, task_id, kind)
    handler.master.notebooks.drop(task_id)
    state = handler.master.commands.kill(handler.user, task_id, kind, row=row)
    if state is None:  # it ended (or had): the row changed in more than its state
        return handler.master.commands.get(task_id, kind)
    return SimpleNamespace(**{**row._asdict(), "alloc_state": state})


def set_proxied_priority(handler: DetHandler, task_id: str, kind: str) -> Any:
    """``det <kind> set priority``: when it starts (once running it is not preempted); returns
    its row afterwards."""
    handler.authorize_task(task_id)
    body = handler.body_json()
    row = handler.master.notebooks.visible(handler.user, task_id, kind)
    handler.master.jobs.update(handler.user, [QueueUpdate(row.job_id, priority=body.get("priority"))],
                               strict=False)
    return handler.master.commands.get(task_id, kind)


class NotebooksHandler(DetHandler):
    max_body = MAX_BODY
    too_large_hint = CONTEXT_HINT
    permissions = {"GET": Perm.VIEW_NSC, "POST": Perm.CREATE_NSC}

    @api(query=[users()])
    def get(self) -> None:
        rows = listed(self, "NOTEBOOK")
        ready = self.master.notebooks.ready
        self.send({"notebooks": [notebook_json(r, r.task_id in ready, task_proxy_url(self, r.task_id))
                                 for r in rows]})

    @api(body=LAUNCH)
    def post(self) -> None:
        config, files, workspace = launch_request(self, "the notebook's")
        row = self.master.commands.launch(self.user, config, files, kind="NOTEBOOK", workspace_id=workspace)
        self.send({"notebook": notebook_json(row, False, task_proxy_url(self, row.task_id)),
                   "config": row.config, "warnings": launch_warnings(self, row),
                   "ticket": self.master.notebooks.ticket(self.user, row.task_id)})


class NotebookHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_NSC}

    @api()
    def get(self, task_id: str) -> None:
        self.authorize_task(task_id)
        row = self.master.notebooks.visible(self.user, task_id)
        self.send({"notebook": notebook_json(row, task_id in self.master.notebooks.ready,
                                             task_proxy_url(self, task_id)),
                   "config": row.config,
                   "ticket": self.master.notebooks.ticket(self.user, task_id)})


class NotebookKillHandler(DetHandler):
    permissions = {"POST": Perm.UPDATE_NSC}

    @api()
    def post(self, task_id: str) -> None:
        row = kill_proxied(self, task_id, "NOTEBOOK")
        self.send({"notebook": notebook_json(row, False)})


class NotebookPriorityHandler(DetHandler):
    """``det notebook set priority``: changes when it starts; once running it is not preempted."""

    permissions = {"POST": Perm.UPDATE_NSC}

    @api(body=PRIORITY)
    def post(self, task_id: str) -> None:
        row = set_proxied_priority(self, task_id, "NOTEBOOK")
        self.send({"notebook": notebook_json(row, task_id in self.master.notebooks.ready)})


class NotebookReportIdleHandler(DetHandler):
    """``PUT /api/v1/notebooks/{id}/report_idle {"idle": bool}``: a notebook's idle checker
    (Determined's ``check_idle.py``, with the task's allocation token) or its owner says
    whether it is idle. ``idle: false`` counts as activity; while a task reports, the master
    stops looking at its Jupyter server itself."""

    permissions = {"PUT": Perm.UPDATE_NSC}
    allow_task = True

    @api(body=obj(idle=BOOL, notebookId=echo(string(), "task_id")))
    def put(self, task_id: str) -> None:
        self.require_task(task_id)
        self.authorize_task(task_id)
        body = self.body_json()
        idle = bool(body.get("idle"))
        named = body.get("notebookId")
        if named not in (None, "", task_id):
            raise InvalidRequest(f"notebookId {str(named)[:60]!r} does not match the path's {task_id}")
        row = self.master.notebooks.visible(self.user, task_id)
        if row.end_time is None:
            self.master.notebooks.report_idle(task_id, idle)
        self.send({})
