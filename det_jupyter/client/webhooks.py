"""Webhooks (``det webhook``): functions over a ``Determined`` session.

A webhook POSTs an event to a URL when a trigger fires: an experiment entering a state, a
metric past a threshold, a task log line matching a pattern, or ``core_context.alert()`` in a
trial (docs/webhooks.md). Its shapes are Determined 0.38.1's ``v1Webhook`` and ``v1Trigger``.
"""

from __future__ import annotations

from typing import Any

from ._errors import InvalidInput

TRIGGER_TYPES = ("EXPERIMENT_STATE_CHANGE", "METRIC_THRESHOLD_EXCEEDED", "TASK_LOG", "CUSTOM")


def trigger(kind: str, condition: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``v1Trigger``: ``kind`` with or without its ``TRIGGER_TYPE_`` prefix."""
    name = kind.upper().removeprefix("TRIGGER_TYPE_")
    if name not in TRIGGER_TYPES:
        raise InvalidInput(f"unknown trigger type {kind!r}; use one of {', '.join(TRIGGER_TYPES)}")
    return {"triggerType": f"TRIGGER_TYPE_{name}", "condition": condition or {}}


def create_webhook(d: Any, name: str, url: str, triggers: list[dict[str, Any]], *,
                   webhook_type: str = "DEFAULT", workspace_id: int | None = None,
                   specific: bool = False) -> dict[str, Any]:
    """A new webhook (``v1Webhook``): global unless ``workspace_id``; ``specific``: only for
    experiments whose config names it (``integrations.webhooks.webhook_name``)."""
    body = {"name": name, "url": url, "triggers": triggers,
            "webhookType": f"WEBHOOK_TYPE_{webhook_type.upper().removeprefix('WEBHOOK_TYPE_')}",
            "mode": "WEBHOOK_MODE_SPECIFIC" if specific else "WEBHOOK_MODE_WORKSPACE"}
    if workspace_id:
        body["workspaceId"] = workspace_id
    return d._session.post("/api/v1/webhooks", body)["webhook"]


def list_webhooks(d: Any) -> list[dict[str, Any]]:
    """The webhooks you may see."""
    return d._session.get("/api/v1/webhooks").get("webhooks") or []


def delete_webhook(d: Any, webhook_id: int) -> None:
    d._session.request("DELETE", f"/api/v1/webhooks/{int(webhook_id)}")


def test_webhook(d: Any, webhook_id: int) -> None:
    """Send the webhook a test event now (``BadRequest`` saying why when it does not land)."""
    d._session.post(f"/api/v1/webhooks/{int(webhook_id)}/test")


def set_webhook_url(d: Any, webhook_id: int, url: str) -> None:
    d._session.request("PATCH", f"/api/v1/webhooks/{int(webhook_id)}", {"url": url})
