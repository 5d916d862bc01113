"""/api/v1/hub/servers: what ``det_jupyter.hub.DetSpawner`` calls, as the hub user (with the
user's server token, which the master verifies through the hub: services.accounts.hub).

A hub server is a notebook task of its user: scheduled, listed and culled like any notebook,
but running ``jupyterhub-singleuser`` at the hub's prefix with the spawner's variables (sealed
in the task's row; only its own task receives them). The hub's proxy reaches it directly at
``url``; det's own ``/proxy/`` does not serve it.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest
from ..services.access.authz import Perm
from ..services.interactive.commands import HubServer
from ._api import api, dict_of, ident, obj, string
from ._base import DetHandler
from ._notebooks import launch_request, notebook_json
from ._wire import CONTEXT, TASK_CONFIG

#: A notebook launch (``LAUNCH``) with where the hub routes it and its spawner's variables.
HUB_SPAWN = obj(("prefix",), config=TASK_CONFIG, files=CONTEXT, workspaceId=ident(), templateName=string(),
                template_name=string(), prefix=string(1024, 1), env=dict_of(string(65536)))


def hub_server_json(handler: DetHandler, row: Any) -> dict[str, Any]:
    """The server's notebook fields, where the hub's proxy reaches it once it answers
    (``url``), and, while it waits in the queue, its place and why (``jobsAhead``,
    ``waitReason``)."""
    ready = row.task_id in handler.master.notebooks.ready
    out = notebook_json(row, ready)
    if out["state"] == "STATE_RUNNING" and row.proxy_address:
        out["url"] = f"http://{row.proxy_address}"
    if out["state"] == "STATE_QUEUED" and row.job_id:
        waiting = handler.master.job_queue.waiting(row.job_id, row.config or {})
        if waiting is not None:
            out["jobsAhead"], reason = waiting
            if reason:
                out["waitReason"] = reason
    if row.end_time is not None:
        out["exitCode"] = row.exit_code
    return out


class HubServersHandler(DetHandler):
    """``POST``: start the caller's server (``prefix``: where the hub routes it; ``env``: the
    spawner's variables; ``config``: a notebook config: pool, slots, priority, image...)."""

    permissions = {"POST": Perm.CREATE_NSC}

    @api(body=HUB_SPAWN)
    def post(self) -> None:
        if self.master.hub_auth is None:
            raise InvalidRequest("this master serves no JupyterHub: start it with --hub-api-url "
                                 "http://HUB/hub/api and the hub's service token in JUPYTERHUB_API_TOKEN "
                                 "(docs/jupyterhub.md)")
        body = self.body_json()
        config, files, workspace = launch_request(self, "the hub server's")
        hub = HubServer(str(body["prefix"]), dict(body.get("env") or {}))
        row = self.master.commands.launch(self.user, config, files, kind="NOTEBOOK",
                                          workspace_id=workspace, hub=hub)
        self.send({"server": hub_server_json(self, row)})


class HubServerHandler(DetHandler):
    """``GET``: a server's state for the spawner's ``poll`` and ``progress``."""

    permissions = {"GET": Perm.VIEW_NSC}

    @api()
    def get(self, task_id: str) -> None:
        self.authorize_task(task_id)
        row = self.master.notebooks.visible(self.user, task_id, "NOTEBOOK")
        self.send({"server": hub_server_json(self, row)})
