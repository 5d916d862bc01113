"""/api/v1/commands: ``det cmd run|list|kill|set priority`` (a task that runs one process)."""

from __future__ import annotations

from typing import Any

from ..services.access.authz import Perm
from ..services.jobs.control import QueueUpdate
from . import _serialize as ser
from ._api import api, users
from ._base import CONTEXT_HINT, MAX_BODY, DetHandler
from ._wire import LAUNCH, PRIORITY

# allocation state -> taskv1State
_TASK_STATE = {
    "PENDING": "STATE_QUEUED", "ASSIGNED": "STATE_STARTING", "PULLING": "STATE_PULLING",
    "RUNNING": "STATE_RUNNING",
    "TERMINATING": "STATE_TERMINATING", "TERMINATED": "STATE_TERMINATED",
}


def command_json(row: Any) -> dict[str, Any]:
    """A ``v1Command``."""
    out: dict[str, Any] = {
        "id": row.task_id, "description": row.description,
        "state": _TASK_STATE.get(row.alloc_state or "TERMINATED", "STATE_TERMINATED"),
        "startTime": ser.ts(row.start_time), "username": row.username, "userId": row.owner_id,
        "displayName": row.username, "resourcePool": row.resource_pool or "", "jobId": row.job_id,
        "workspaceId": 1,
    }
    if row.end_time is not None:
        code = row.exit_code
        out["exitStatus"] = (f"exited with code {code}" if code is not None else
                             (row.exit_reason or "ended"))
    return out


class CommandsHandler(DetHandler):
    max_body = MAX_BODY
    too_large_hint = CONTEXT_HINT
    permissions = {"GET": Perm.VIEW_NSC, "POST": Perm.CREATE_NSC}

    @api(query=[users()])
    def get(self) -> None:
        from ._notebooks import listed  # (a cycle at import time: _notebooks imports command_json)

        rows = listed(self, "COMMAND", owner_only=False)
        self.send({"commands": [command_json(r) for r in rows],
                   "pagination": ser.pagination(0, 0, len(rows), len(rows))})

    @api(body=LAUNCH, body_required=True)
    def post(self) -> None:
        from ._notebooks import launch_workspace

        body = self.body_json()
        workspace = launch_workspace(self, body)
        files = body.get("files") or []
        from ._templates import expand_config, launch_template_name

        config = body.get("config") or {}
        template = launch_template_name(body)
        if template is not None:  # the merged config is what the command stores
            config = expand_config(self, template, config)
        row = self.master.commands.launch(self.user, config, files,
                                          workspace_id=workspace)
        res = row.config["resources"]
        warnings = self.master.rm.launch_warnings(res["resource_pool"], res["slots"])
        self.send({"command": command_json(row), "config": row.config, "warnings": warnings})


class CommandHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_NSC}

    @api()
    def get(self, task_id: str) -> None:
        self.authorize_task(task_id)
        row = self.master.commands.get(task_id)
        self.send({"command": command_json(row), "config": row.config})


class CommandKillHandler(DetHandler):
    permissions = {"POST": Perm.UPDATE_NSC}

    @api()
    def post(self, task_id: str) -> None:
        self.authorize_task(task_id)
        self.master.commands.kill(self.user, task_id)
        self.send({"command": command_json(self.master.commands.get(task_id))})


class CommandPriorityHandler(DetHandler):
    """``det cmd set priority``: changes when it starts; once running it is not preempted."""

    permissions = {"POST": Perm.UPDATE_NSC}

    @api(body=PRIORITY)
    def post(self, task_id: str) -> None:
        self.authorize_task(task_id)
        body = self.body_json()
        row = self.master.commands.get(task_id)
        self.master.jobs.update(self.user, [QueueUpdate(row.job_id, priority=body.get("priority"))],
                                strict=False)
        self.send({"command": command_json(self.master.commands.get(task_id))})
