"""The webhook store (``store.webhooks``) on each backend, without the service: definitions,
what fired once, and the facts payloads read."""

from __future__ import annotations

import sqlalchemy as sa

from det_jupyter.store import jobs, tasks
from det_jupyter.store import webhooks as hooks

from ._rows import NOW, make_user, make_world


def _hook(conn: sa.Connection, name: str, workspace_id: int | None = None) -> int:
    hook_id = hooks.insert(conn, name=name, url="", webhook_type="DEFAULT", mode="WORKSPACE",
                           workspace_id=workspace_id, created_at=NOW)
    assert hooks.set_url(conn, hook_id, f"https://example.test/{name}")
    hooks.insert_triggers(conn, hook_id, [("EXPERIMENT_STATE_CHANGE", {"state": "COMPLETED"}),
                                          ("TASK_LOG", {"regex": "boom"})])
    return hook_id


def test_definitions_are_stored_loaded_and_deleted(engine: sa.Engine) -> None:
    _, exp_id, _ = make_world(engine)
    with engine.begin() as conn:
        ws = hooks.experiment(conn, exp_id).ws_id
        first = _hook(conn, "one")
        second = _hook(conn, "two", workspace_id=ws)
        assert hooks.name_taken(conn, "one", None) and not hooks.name_taken(conn, "one", ws)
        assert hooks.name_taken(conn, "two", ws) and not hooks.name_taken(conn, "two", None)
        assert not hooks.set_url(conn, 10**6, "https://x.test")
    with engine.connect() as conn:
        rows, trigs = hooks.load(conn)
        assert [(r.id, r.name, r.url) for r in rows] == [
            (first, "one", "https://example.test/one"), (second, "two", "https://example.test/two")]
        assert [(r.webhook_id, r.trigger_type) for r in trigs] == [
            (first, "EXPERIMENT_STATE_CHANGE"), (first, "TASK_LOG"),
            (second, "EXPERIMENT_STATE_CHANGE"), (second, "TASK_LOG")]
        rows, trigs = hooks.load(conn, second)
        assert [r.id for r in rows] == [second] and {r.webhook_id for r in trigs} == {second}
        assert trigs[0].condition == {"state": "COMPLETED"}
    with engine.begin() as conn:
        assert hooks.fire_once(conn, trigs[1].id, "task:t", NOW)
        assert hooks.delete(conn, second) and not hooks.delete(conn, second)
    with engine.connect() as conn:
        rows, trigs = hooks.load(conn)
        assert [r.id for r in rows] == [first] and {r.webhook_id for r in trigs} == {first}


def test_a_trigger_fires_once_per_subject(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        hook_id = _hook(conn, "one")
        trig = hooks.load(conn, hook_id)[1][0].id
        assert hooks.fire_once(conn, trig, "trial:1", NOW)
        assert not hooks.fire_once(conn, trig, "trial:1", NOW + 1)
        assert hooks.fire_once(conn, trig, "trial:2", NOW)
        assert not hooks.fire_once(conn, 10**6, "trial:1", NOW)  # deleted meanwhile


def test_what_payloads_read(engine: sa.Engine) -> None:
    _, exp_id, trial_id = make_world(engine)
    alice = make_user(engine, "alice")
    with engine.begin() as conn:
        jobs.insert_job(conn, job_id="job-1", job_type="SHELL", owner_id=alice, priority=42, weight=1.0,
                        max_slots=None, resource_pool="", queue_position=NOW, submitted_at=NOW)
        tasks.insert(conn, task_id="sh-1", job_id="job-1", owner_id=alice, description="shell", config={},
                     context=None, start_time=NOW, task_type="SHELL", workspace_id=1)
    with engine.connect() as conn:
        exp = hooks.experiment(conn, exp_id)
        assert exp is not None and (exp.id, exp.start_time) == (exp_id, NOW)
        assert exp.project.startswith("proj-") and exp.ws.startswith("ws-") and exp.ws_id > 0
        assert hooks.experiment(conn, 10**6) is None
        assert hooks.experiment_state(conn, exp_id) == "ACTIVE" and hooks.experiment_state(conn, 10**6) is None
        assert hooks.experiment_of_trial(conn, trial_id) == exp_id and hooks.experiment_of_trial(conn, 10**6) is None
        scope = hooks.task_scope(conn, "sh-1")
        assert scope is not None and (scope.workspace_id, scope.task_type) == (1, "SHELL")
        assert hooks.task_scope(conn, "nope") is None
