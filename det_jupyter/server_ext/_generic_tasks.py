"""``det task create|fork|config|kill|pause|unpause``: 0.38.1's generic tasks, and the verbs
of ``/api/v1/tasks/{id}`` that act on any task.

Who may: creating needs CREATE_NSC on the project's workspace; reading a task's config, what
reading the task needs (``authorize_task_kind``); killing, pausing and unpausing, UPDATE_NSC
on its workspace (UPDATE_EXPERIMENT for a trial's task) and, for an interactive or generic
task, being its owner or an admin — 404 to whoever may not see it, 403 to a viewer.
"""

from __future__ import annotations

import json
from typing import Any

from ..config import load_yaml
from ..errors import Forbidden, InvalidRequest, NotFound
from ..services.access.authz import Perm
from ..services.interactive import generic
from ..services.interactive.kinds import KINDS
from ..services.interactive.ssh import PRIVATE_KEY
from ._api import BOOL, api, ident, obj, string
from ._base import CONTEXT_HINT, MAX_BODY, DetHandler
from ._wire import CONTEXT

#: ``v1CreateGenericTaskRequest``.
CREATE = obj(
    config=string(MAX_BODY),
    contextDirectory=CONTEXT,
    projectId=ident(),
    forkedFrom=string(128),
    parentId=string(128),
    inheritContext=BOOL,
    noPause=BOOL,
)


def _trial_task(task_id: str) -> bool:
    return task_id.split(".", 1)[0].isdigit()


def task_config(handler: DetHandler, task_id: str) -> dict[str, Any]:
    """The config ``det task config`` shows: a generic task's as its user wrote it, another
    interactive task's as stored (without its sealed secrets), a trial's its experiment's."""
    if _trial_task(task_id):
        exp_id = int(task_id.split(".", 1)[0])
        return dict(handler.master.experiments.get(exp_id).config)
    row = handler.master.commands.get(task_id, None)
    cfg = row.config or {}
    if row.task_type == generic.KIND:
        return dict(cfg.get(generic.USER_CONFIG) or {})
    return {k: v for k, v in cfg.items() if k != PRIVATE_KEY}


def editable_row(handler: DetHandler, task_id: str) -> Any:
    """An interactive or generic task the caller may change (UPDATE_NSC there, and its owner
    or an admin); its row."""
    handler.authorize_task(task_id, Perm.VIEW_NSC)  # 404 to whoever may not see it
    row = handler.master.commands.get(task_id, None)
    user = handler.user
    if row.task_type in KINDS and not user.admin and row.owner_id != user.id:
        raise NotFound(f"task {task_id} not found")  # proxied kinds are hidden from others
    handler.authorize_task(task_id, Perm.UPDATE_NSC)
    if not user.admin and row.owner_id != user.id:
        raise Forbidden(f"only task {task_id}'s owner ({row.username}) or an admin may change it")
    return row


class GenericTasksHandler(DetHandler):
    """``POST /api/v1/generic-tasks`` (``det task create FILE``, ``det task fork ID``)."""

    max_body = MAX_BODY
    too_large_hint = CONTEXT_HINT
    permissions = {"POST": Perm.CREATE_NSC}

    @api(body=CREATE, body_required=True)
    def post(self) -> None:
        body = self.body_json()
        workspace = self.authorize_project(body.get("projectId") or 1, Perm.CREATE_NSC)
        text = body.get("config") or ""
        raw = load_yaml(text, what="the task config") if text.strip() else None
        if raw is not None and not isinstance(raw, dict):
            raise InvalidRequest(
                "the task config must be a YAML mapping (entrypoint, resources, ...)"
            )
        files = body.get("contextDirectory") or []
        context = None
        forked_from = body.get("forkedFrom") or None
        if forked_from is not None:
            forked = self._readable_generic(forked_from, "fork")
            raw = generic.merge_fork(raw, forked.config.get(generic.USER_CONFIG))
            if not files:
                context = self.master.commands.context_tgz(forked_from)
        if raw is None:
            raise InvalidRequest("no config file nor forked task provided")
        parent_id = body.get("parentId") or None
        if parent_id is not None:
            self._readable_generic(parent_id, "parent")
            if body.get("inheritContext"):
                context = self.master.commands.context_tgz(parent_id)
        elif body.get("inheritContext"):
            raise InvalidRequest("inheritContext needs parentId: the task whose context to inherit")
        if files and not body.get("inheritContext"):
            from ..config import context_to_tgz

            context = context_to_tgz(files)
        row = self.master.generic_tasks.create(
            self.user,
            raw,
            context=context,
            workspace_id=workspace,
            forked_from=forked_from,
            parent_id=parent_id,
            no_pause=bool(body.get("noPause")),
        )
        res = row.config["resources"]
        self.send(
            {
                "taskId": row.task_id,
                "warnings": self.master.rm.launch_warnings(res["resource_pool"], res["slots"]),
            }
        )

    def _readable_generic(self, task_id: str, what: str) -> Any:
        self.authorize_task(task_id, Perm.VIEW_NSC)
        row = self.master.commands.get(task_id, None)
        if row.task_type in KINDS and not self.user.admin and row.owner_id != self.user.id:
            raise NotFound(f"task {task_id} not found")
        if row.task_type != generic.KIND:
            raise InvalidRequest(
                f"task {task_id} is a {row.task_type.lower()}, not a generic task "
                f"(det task create makes those); it cannot be the {what}"
            )
        return row


class TaskConfigHandler(DetHandler):
    """``GET /api/v1/tasks/{id}/config`` (``v1GetGenericTaskConfigResponse``)."""

    permissions = {"GET": Perm.VIEW_EXPERIMENT_METADATA}

    @api()
    def get(self, task_id: str) -> None:
        self.access.authorize_task_kind(task_id)
        if not _trial_task(task_id):
            row = self.master.commands.get(task_id, None)
            if row.task_type in KINDS and not self.user.admin and row.owner_id != self.user.id:
                raise NotFound(f"task {task_id} not found")
        self.send({"config": json.dumps(task_config(self, task_id))})


class TaskKillHandler(DetHandler):
    """``POST /api/v1/tasks/{id}/kill`` (``det task kill``): any task the caller may change —
    a generic task as 0.38.1 kills one (canceled), another interactive task as its own kill
    route, a trial's task as ``det trial kill``."""

    # A trial's task needs UPDATE_EXPERIMENT, an interactive one UPDATE_NSC (``task_perm``).
    permissions = {"POST": Perm.UPDATE_EXPERIMENT}

    @api(body=obj(taskId=string(128), killFromRoot=BOOL))
    def post(self, task_id: str) -> None:
        body = self.body_json()
        named = body.get("taskId")
        if named not in (None, "", task_id):
            raise InvalidRequest(f"taskId {str(named)[:60]!r} does not match the path's {task_id}")
        if _trial_task(task_id):
            self.access.authorize_task_kind(task_id)
            trial_id, _ = self.master.experiments.unmanaged.trial_of_task(task_id)
            self.master.trials.kill_trial(trial_id)
        else:
            row = editable_row(self, task_id)
            if row.task_type == generic.KIND:
                self.master.generic_tasks.kill(task_id)
            else:
                if row.task_type in KINDS:
                    self.master.notebooks.drop(task_id)  # the proxy stops routing to it first
                self.master.commands.kill(self.user, task_id, row.task_type, row=row)
        self.send({})


class TaskPauseHandler(DetHandler):
    """``POST /api/v1/tasks/{id}/pause|unpause``: generic tasks only, as in 0.38.1."""

    permissions = {"POST": Perm.UPDATE_EXPERIMENT}  # as the kill's

    @api()
    def post(self, task_id: str, verb: str) -> None:
        if _trial_task(task_id):
            self.access.authorize_task_kind(task_id)
            raise InvalidRequest(
                f"task {task_id} is a trial's; det experiment pause|activate "
                "pauses and resumes experiments"
            )
        row = editable_row(self, task_id)
        if row.task_type != generic.KIND:
            raise InvalidRequest(
                f"task {task_id} is a {row.task_type.lower()}; only generic tasks "
                f"(det task create) can {verb}"
            )
        if verb == "pause":
            self.master.generic_tasks.pause(task_id)
        else:
            self.master.generic_tasks.unpause(task_id)
        self.send({})
