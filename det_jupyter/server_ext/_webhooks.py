"""/api/v1/webhooks: Determined 0.38.1's webhooks (v1Webhook, v1Trigger, v1PostWebhookEventDataRequest).

Who may (0.38.1's RBAC, EDIT_WEBHOOKS and VIEW_WEBHOOKS, on our permissions): a workspace's
webhooks are created, changed, tested and deleted by whoever may create experiments there
(Editor, WorkspaceAdmin) and listed by whoever may view it; a global webhook (no
``workspaceId``) needs that permission cluster-wide (ClusterAdmin, or a cluster-wide Editor).
Unlike 0.38.1, which lists global webhooks to every user, they are listed only to those who
may view every workspace: a webhook's URL (Slack's) is a credential.

``POST /api/v1/webhooks/custom`` is what ``core_context.alert()`` sends from a trial: its
caller must be able to change the experiment (its owner's task token can).
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import InvalidRequest
from ..services.access.authz import Perm
from ..services.webhooks import payloads as wp
from ..services.webhooks.service import Webhook
from ._api import ANY_OBJECT, api, array, enum, ident, obj, string, text
from ._base import DetHandler

EDIT, VIEW = Perm.CREATE_EXPERIMENT, Perm.VIEW_WORKSPACE
_URL = string(2048, pattern=wp.URL_PATTERN, description="where events are POSTed: an http:// or https:// URL")
_CONDITION = {**ANY_OBJECT, "description": (
    'EXPERIMENT_STATE_CHANGE: {"state": "COMPLETED"} (an experiment state); TASK_LOG: {"regex": "..."}; '
    'METRIC_THRESHOLD_EXCEEDED: {"metricName", "threshold", "compareOperator" (GREATER_THAN, '
    'GREATER_THAN_OR_EQUAL, LESS_THAN, LESS_THAN_OR_EQUAL), "metricGroup" (validation, training)}; '
    "CUSTOM: {} (only on a webhook of mode WEBHOOK_MODE_SPECIFIC)")}
_TRIGGER = obj(("triggerType",), id=ident(), webhookId=ident(), condition=_CONDITION,
               triggerType=enum(*wp.TRIGGER_TYPES))
WEBHOOK = obj(
    ("url", "webhookType", "name", "triggers"),
    id=ident(), url=_URL, name=text(255, empty=False), workspaceId=ident(description="0 or none: global"),
    webhookType=enum(*wp.WEBHOOK_TYPES), mode=enum("WEBHOOK_MODE_UNSPECIFIED", *wp.MODES),
    triggers=array(_TRIGGER, 32, minItems=1),
)
_LEVEL = enum("LOG_LEVEL_UNSPECIFIED", *wp.LEVELS)
_UNWIRE = {v: k for k, v in {**wp.TRIGGER_TYPES, **wp.WEBHOOK_TYPES, **wp.MODES}.items()}


def webhook_json(hook: Webhook) -> dict[str, Any]:
    """``v1Webhook`` (``workspaceId`` 0: global, as 0.38.1's proto says it)."""
    return {
        "id": hook.id, "url": hook.url, "name": hook.name, "workspaceId": hook.workspace_id or 0,
        "webhookType": _UNWIRE[hook.webhook_type], "mode": _UNWIRE[hook.mode],
        "triggers": [{"id": trig.id, "triggerType": _UNWIRE[trig.trigger_type], "condition": dict(trig.condition),
                      "webhookId": trig.webhook_id} for trig in hook.triggers],
    }


def authorize_edit(handler: DetHandler, workspace_id: int | None, *, creating: bool = False) -> None:
    """EDIT on the workspace (404 to a caller who may not see it, 403 to one who may see but
    not change it), or cluster-wide for a global webhook (which the list shows only to those
    who may view every workspace: 404 to others, except when ``creating`` one)."""
    if workspace_id is not None:
        handler.authorize_workspace(workspace_id, EDIT)
        return
    handler.access.authorize_global(
        EDIT, VIEW, f"{handler.request.path}: webhook", creating=creating,  # hidden from its list too
        refusal="a global webhook (no workspaceId) needs a cluster-wide role that may create "
                "experiments (ClusterAdmin); give a workspaceId for a workspace's webhook")


def _hook(handler: DetHandler, webhook_id: str) -> Webhook:
    hook = handler.master.webhooks.get(int(webhook_id))
    authorize_edit(handler, hook.workspace_id)
    return hook


class WebhooksHandler(DetHandler):
    permissions = {"GET": VIEW, "POST": EDIT}

    @api()
    def get(self) -> None:
        visible = self.visible_workspaces(VIEW)
        hooks = self.master.webhooks.list(visible, include_global=visible is None)
        self.send({"webhooks": [webhook_json(h) for h in hooks]})

    @api(body=WEBHOOK, body_required=True, errors=(409,))
    def post(self) -> None:
        body = self.body_json()
        workspace_id = body.get("workspaceId") or None
        authorize_edit(self, workspace_id, creating=True)
        triggers = body.get("triggers") or []
        hook = self.master.webhooks.create(
            url=body.get("url"), webhook_type=body.get("webhookType"), mode=body.get("mode") or "",
            name=body.get("name"), workspace_id=workspace_id, triggers=triggers)
        self.send({"webhook": webhook_json(hook)})


class WebhookHandler(DetHandler):
    permissions = {"DELETE": EDIT, "PATCH": EDIT}

    @api()
    def delete(self, webhook_id: str) -> None:
        _hook(self, webhook_id)
        self.master.webhooks.delete(int(webhook_id))
        self.send({})

    @api(body=obj(("url",), url=_URL), body_required=True)
    def patch(self, webhook_id: str) -> None:
        """``v1PatchWebhook``: 0.38.1 changes only the URL."""
        _hook(self, webhook_id)  # before the body: who may not see it learns nothing from a 400
        self.master.webhooks.set_url(int(webhook_id), self.body_json().get("url"))
        self.send({})


class WebhookTestHandler(DetHandler):
    permissions = {"POST": EDIT}

    @api()
    async def post(self, webhook_id: str) -> None:
        """Send a test event now and say whether it landed (400 saying why not)."""
        hook = _hook(self, webhook_id)
        await asyncio.get_running_loop().run_in_executor(None, self.master.webhooks.test, hook)
        self.send({"completed": True})  # v1TestWebhookResponse (0.38.1 leaves it false)


class WebhookEventDataHandler(DetHandler):
    """``core_context.alert(title, description, level)`` from a trial."""

    allow_task = True
    permissions = {"POST": Perm.UPDATE_EXPERIMENT}

    @api(body=obj(("data", "experimentId"), experimentId=ident(), trialId=ident(),
                  data=obj(title=string(4096), description=string(64 * 1024), level=_LEVEL)),
         body_required=True)
    def post(self) -> None:
        body = self.body_json()
        exp_id = int(body["experimentId"])
        self.require_experiment(exp_id)
        self.authorize_experiment(exp_id)
        trial_id = body.get("trialId") or None
        if trial_id is not None:
            self.require_trial(trial_id)
            if self.master.webhooks.experiment_of_trial(trial_id) != exp_id:
                raise InvalidRequest(f"trial {trial_id} is not a trial of experiment {exp_id}")
        data = body.get("data") or {}
        self.master.webhooks.alert(exp_id, trial_id, data.get("title") or "", data.get("description") or "",
                                   data.get("level") or "LOG_LEVEL_UNSPECIFIED")
        self.send({})
