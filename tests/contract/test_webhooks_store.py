"""Webhooks in the store (services.webhooks), on each backend: migration 11, definitions,
scopes, sealing, and the once-per-subject record."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from det_jupyter.errors import Conflict, InvalidRequest, NotFound
from det_jupyter.services.common.clock import FakeClock
from det_jupyter.services.common.sealed import Sealer
from det_jupyter.services.webhooks.service import WebhookService
from det_jupyter.store import _migrate, migrate
from det_jupyter.store import tables as t

DONE = [{"triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE", "condition": {"state": "COMPLETED"}}]


def _workspace(engine: sa.Engine, ws_id: int) -> None:
    with engine.begin() as conn:
        if conn.execute(sa.select(t.users.c.id).where(t.users.c.id == 1)).first() is None:
            conn.execute(sa.insert(t.users).values(id=1, username="admin", password_hash="x", admin=True,
                                                   active=True, created_at=0.0, modified_at=0.0))
        conn.execute(sa.insert(t.workspaces).values(id=ws_id, name=f"ws{ws_id}", immutable=False, archived=False,
                                                    user_id=1))


@pytest.fixture
def service(engine: sa.Engine) -> WebhookService:
    _workspace(engine, 1)
    _workspace(engine, 2)
    return WebhookService(engine, FakeClock(), signing_key="k", sealer=Sealer(b"\x01" * 32))


def _create(s: WebhookService, name: str, ws: int | None = None, url: str = "http://h/x") -> int:
    return s.create(url=url, webhook_type="WEBHOOK_TYPE_DEFAULT", mode="WEBHOOK_MODE_WORKSPACE", name=name,
                    workspace_id=ws, triggers=DONE).id


def test_step_11_adds_the_webhook_tables(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        for table in reversed(t.WEBHOOK_TABLES):
            table.drop(conn)
        conn.execute(sa.delete(t.schema_version).where(t.schema_version.c.version >= 11))
    assert migrate(engine) == max(number for number, _ in _migrate.MIGRATIONS)
    names = set(sa.inspect(engine).get_table_names())
    assert {"webhooks", "webhook_triggers", "webhook_fired"} <= names


def test_create_get_list_and_delete(service: WebhookService) -> None:
    g = _create(service, "g")
    w1 = _create(service, "w", 1)
    w2 = _create(service, "w", 2)  # a name is unique within its scope only
    hook = service.get(w1)
    assert (hook.name, hook.url, hook.webhook_type, hook.mode, hook.workspace_id) == \
        ("w", "http://h/x", "DEFAULT", "WORKSPACE", 1)
    assert [(tr.trigger_type, dict(tr.condition)) for tr in hook.triggers] == \
        [("EXPERIMENT_STATE_CHANGE", {"state": "COMPLETED"})]
    assert [h.id for h in service.list(None, include_global=True)] == [g, w1, w2]
    assert [h.id for h in service.list(frozenset({2}), include_global=False)] == [w2]
    with pytest.raises(Conflict, match="already exists among workspace 1"):
        _create(service, "w", 1)
    with pytest.raises(Conflict, match="global webhooks"):
        _create(service, "g")
    service.delete(w1)
    with pytest.raises(NotFound):
        service.delete(w1)
    with pytest.raises(NotFound):
        service.get(w1)
    after = _create(service, "again", 1)
    assert after > w2  # ids are never given again


def test_bad_definitions_are_refused(service: WebhookService) -> None:
    for kw, message in (({"webhook_type": "WEBHOOK_TYPE_UNSPECIFIED"}, "webhookType"),
                        ({"mode": "WEBHOOK_MODE_SOMETIMES"}, "mode must be one of"),
                        ({"url": "file:///etc/passwd"}, "url must be"),
                        ({"name": "  "}, "must not be empty")):
        args = {"url": "http://h/", "webhook_type": "WEBHOOK_TYPE_SLACK", "mode": "", "name": "n",
                "workspace_id": None, "triggers": DONE, **kw}
        with pytest.raises(InvalidRequest, match=message):
            service.create(**args)
    assert service.list(None, include_global=True) == []


def test_urls_are_sealed_at_rest_and_can_be_changed(engine: sa.Engine, service: WebhookService) -> None:
    hook_id = _create(service, "slack", url="https://hooks.slack.com/services/T/B/secret")
    with engine.connect() as conn:
        stored = conn.execute(sa.select(t.webhooks.c.url)).scalar_one()
    assert stored.startswith("sealed1:") and "secret" not in stored
    service.set_url(hook_id, "https://hooks.slack.com/services/T/B/other")
    assert service.get(hook_id).url == "https://hooks.slack.com/services/T/B/other"
    with pytest.raises(NotFound):
        service.set_url(999, "http://h/")


def test_a_workspace_delete_takes_its_webhooks(engine: sa.Engine, service: WebhookService) -> None:
    kept = _create(service, "kept", 1)
    _create(service, "gone", 2)
    with engine.begin() as conn:
        conn.execute(sa.delete(t.workspaces).where(t.workspaces.c.id == 2))
    assert [h.id for h in service.list(None, include_global=True)] == [kept]
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(t.webhook_triggers)).scalar_one() == 1


def test_a_once_per_subject_trigger_fires_once(service: WebhookService) -> None:
    hook = service.get(_create(service, "h"))
    trig = hook.triggers[0].id
    assert service._first_time(trig, "task:a") is True
    assert service._first_time(trig, "task:a") is False
    assert service._first_time(trig, "task:b") is True
    service.delete(hook.id)
    assert service._first_time(trig, "task:c") is False  # the trigger is gone
