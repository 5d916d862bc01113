"""The access and workspaces stores (``store.rbac``, ``store.workspaces``) on each backend,
without the services: what each write stores and each read gives back."""

from __future__ import annotations

import sqlalchemy as sa

from det_jupyter.store import groups as gstore
from det_jupyter.store import rbac
from det_jupyter.store import tables as t
from det_jupyter.store import workspaces as ws

from ._rows import NOW, make_experiment, make_trial, make_user


def _world(engine: sa.Engine) -> tuple[int, int, int, int, int]:
    """(user, workspace, project, experiment, trial), made through ``store.workspaces``."""
    user_id = make_user(engine)
    with engine.begin() as conn:
        ws_id = ws.insert_workspace(conn, "team", user_id)
        project_id = ws.insert_project(conn, workspace_id=ws_id, name="proj", description="", immutable=False,
                                       archived=False, user_id=user_id, notes=[], created_at=NOW, key="PRO")
    exp_id = make_experiment(engine, user_id, project_id)
    return user_id, ws_id, project_id, exp_id, make_trial(engine, exp_id)


def test_grants_and_assignments(engine: sa.Engine) -> None:
    alice, bob = make_user(engine, "alice"), make_user(engine, "admin")
    with engine.begin() as conn:
        ws_id = ws.insert_workspace(conn, "team", alice)
        group = gstore.insert(conn, "g")
        gstore.add_members(conn, group, [alice])
        rbac.add_assignment(conn, "Editor", alice, None, ws_id)
        rbac.add_assignment(conn, "Editor", alice, None, ws_id)  # stored once
        rbac.add_assignment(conn, "Viewer", None, group, None)
        rbac.add_assignment(conn, "ClusterAdmin", bob, None, None)
        rbac.set_admin(conn, bob, True)
    with engine.connect() as conn:
        assert sorted((r.role, r.workspace_id) for r in rbac.grant_rows(conn, alice)) == [
            ("Editor", ws_id), ("Viewer", None)]
        assert rbac.is_admin(conn, bob) is True and rbac.is_admin(conn, alice) is False
        assert rbac.is_admin(conn, 10**6) is None
        assert rbac.user_exists(conn, alice) and not rbac.user_exists(conn, 10**6)
        assert rbac.username(conn, bob) == "admin" and rbac.username(conn, 10**6) is None
        assert rbac.workspace_exists(conn, ws_id) and not rbac.workspace_exists(conn, 10**6)
        everything = rbac.assignments(conn, user_id=None, group_id=None, workspace_id=None, any_scope=True)
        assert [(r.role, r.user_id, r.group_id) for r in everything] == [
            ("Editor", alice, None), ("Viewer", None, group), ("ClusterAdmin", bob, None)]
        cluster_wide = rbac.assignments(conn, user_id=None, group_id=None, workspace_id=None, any_scope=False)
        assert [r.role for r in cluster_wide] == ["Viewer", "ClusterAdmin"]
        assert [r.role for r in rbac.assignments(conn, user_id=alice, group_id=None, workspace_id=ws_id,
                                                 any_scope=True)] == ["Editor"]
        assert [r.role for r in rbac.assignments(conn, user_id=None, group_id=group, workspace_id=None,
                                                 any_scope=True)] == ["Viewer"]
        assert rbac.assigned_users(conn) == {alice, bob}
        assert sorted((r.id, bool(r.admin)) for r in rbac.users_and_admin(conn)) == [(alice, False), (bob, True)]
    with engine.begin() as conn:
        assert rbac.delete_assignment(conn, "Editor", alice, None, ws_id) == 1
        assert rbac.delete_assignment(conn, "Editor", alice, None, ws_id) == 0
        assert rbac.delete_assignment(conn, "Viewer", None, group, None) == 1
    with engine.connect() as conn:
        assert rbac.grant_rows(conn, alice) == []


def test_where_objects_live(engine: sa.Engine) -> None:
    user_id, ws_id, project_id, exp_id, trial_id = _world(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(t.checkpoints).values(
            uuid="ck", trial_id=trial_id, experiment_id=exp_id, task_id="task", allocation_id="a",
            report_time=NOW, state="COMPLETED", resources={}, ckpt_metadata={}, steps_completed=1))
        conn.execute(sa.insert(t.models).values(
            name="m", description="", labels=[], meta={}, notes="", workspace_id=ws_id, user_id=user_id,
            archived=False, created_at=NOW, updated_at=NOW))
        job = conn.execute(sa.select(t.experiments.c.job_id).where(t.experiments.c.id == exp_id)).scalar_one()
    with engine.connect() as conn:
        assert rbac.workspace_of_project(conn, project_id) == ws_id
        assert rbac.workspace_of_experiment(conn, exp_id) == ws_id
        assert rbac.workspace_of_trial(conn, trial_id) == ws_id
        assert rbac.workspace_of_checkpoint(conn, "ck") == ws_id
        assert rbac.workspace_of_model(conn, "m") == ws_id
        for lookup, missing in ((rbac.workspace_of_project, 10**6), (rbac.workspace_of_experiment, 10**6),
                                (rbac.workspace_of_trial, 10**6), (rbac.workspace_of_checkpoint, "nope"),
                                (rbac.workspace_of_model, "nope"), (rbac.workspace_of_template, "nope")):
            assert lookup(conn, missing) is None
        trial_task = conn.execute(sa.select(t.trials.c.task_id).where(t.trials.c.id == trial_id)).scalar_one()
        assert rbac.task_location(conn, trial_task) == (None, trial_id)
        assert rbac.task_location(conn, "no-such-task") == (None, None)
        assert rbac.workspaces_of_jobs(conn, [job, "nope"]) == {job: (ws_id, True)}


def test_workspace_and_project_records_and_pages(engine: sa.Engine) -> None:
    user_id, ws_id, project_id, exp_id, _ = _world(engine)
    other = make_user(engine, "bob")
    with engine.begin() as conn:
        ws2 = ws.insert_workspace(conn, "Second", other)
        ws.update_workspace(conn, ws2, archived=True)
        ws.set_pin(conn, ws2, user_id, NOW)
        p2 = ws.insert_project(conn, workspace_id=ws2, name="later", description="d", immutable=False,
                               archived=False, user_id=other, notes=[{"name": "n", "contents": "c"}],
                               created_at=NOW, key="LAT")
    later = make_experiment(engine, other, p2)
    with engine.begin() as conn:
        conn.execute(sa.update(t.experiments).where(t.experiments.c.id == later).values(start_time=NOW + 10))
    page = {"sort": "id", "descending": False, "offset": 0, "limit": 0}
    with engine.connect() as conn:
        record = ws.workspace_record(conn, ws_id, user_id)
        assert record is not None and (record.name, record.username, record.num_projects, record.num_experiments,
                                       record.pinned_at) == ("team", "alice", 1, 1, None)
        assert ws.workspace_record(conn, 10**6, user_id) is None
        pinned = ws.workspace_record(conn, ws2, user_id)
        assert pinned is not None and (pinned.archived, pinned.pinned_at) == (True, NOW)
        assert ws.workspace_record(conn, ws2, other).pinned_at is None  # pins are per user
        records, total = ws.list_workspaces(conn, user_id, **page)
        assert ([r.id for r in records], total) == ([ws_id, ws2], 2)
        for filters, expected in (({"ids": [ws2]}, [ws2]), ({"name": "SECOND"}, [ws2]), ({"exact_name": "team"},
                                  [ws_id]), ({"archived": False}, [ws_id]), ({"pinned": True}, [ws2]),
                                  ({"users": ["bob"]}, [ws2]), ({"user_ids": [user_id]}, [ws_id])):
            assert [r.id for r in ws.list_workspaces(conn, user_id, **page, **filters)[0]] == expected, filters
        records, total = ws.list_workspaces(conn, user_id, **{**page, "sort": "name", "offset": -1})
        assert ([r.name for r in records], total) == (["team"], 2)  # a negative offset counts from the end

        project = ws.project_record(conn, project_id)
        assert project is not None and (project.workspace_name, project.num_experiments, project.num_active_experiments,
                                        project.num_runs, project.last_experiment_started_at) == ("team", 1, 1, 1, NOW)
        assert ws.project_record(conn, p2).notes == (("n", "c"),) and ws.project_record(conn, 10**6) is None
        records, total = ws.list_projects(conn, **{**page, "sort": "last_started", "descending": True})
        assert ([r.id for r in records], total) == ([p2, project_id], 2)
        assert [r.id for r in ws.list_projects(conn, workspace_id=ws2, **page)[0]] == [p2]
        assert [r.id for r in ws.list_projects(conn, workspace_ids=[ws_id], name="PROJ", **page)[0]] == [project_id]
        assert ws.list_projects(conn, workspace_ids=[], **page) == ([], 0)


def test_rows_lookups_and_updates(engine: sa.Engine) -> None:
    user_id, ws_id, project_id, _, _ = _world(engine)
    with engine.begin() as conn:
        assert ws.workspace_named(conn, "team") and not ws.workspace_named(conn, "x")
        assert ws.project_named(conn, ws_id, "proj") and not ws.project_named(conn, ws_id, "x")
        assert ws.project_by_names(conn, "team", "proj") == project_id
        assert ws.project_by_names(conn, "team", "proj", workspace_ids=[]) is None
        assert ws.project_by_names(conn, "team", "x") is None
        assert ws.workspace_of_project(conn, project_id) == ws_id and ws.workspace_of_project(conn, 10**6) is None
        assert ws.project_keys(conn) == {"PRO"}
        ws.update_workspace(conn, ws_id, name="renamed")
        ws.update_project(conn, project_id, name="p2", notes=[{"name": "a", "contents": "b"}])
        ws.set_pin(conn, ws_id, user_id, NOW)
        ws.set_pin(conn, ws_id, user_id, NOW + 5)  # pinned again: the new time
    with engine.connect() as conn:
        assert ws.workspace(conn, ws_id).name == "renamed" and ws.workspace(conn, 10**6) is None
        row = ws.project(conn, project_id)
        assert row is not None and (row.name, row.notes) == ("p2", [{"name": "a", "contents": "b"}])
        assert ws.project(conn, 10**6) is None
        assert ws.workspace_record(conn, ws_id, user_id).pinned_at == NOW + 5
    with engine.begin() as conn:
        ws.set_pin(conn, ws_id, user_id, None)
    with engine.connect() as conn:
        assert ws.workspace_record(conn, ws_id, user_id).pinned_at is None


def test_deleting_what_a_workspace_holds(engine: sa.Engine) -> None:
    user_id, ws_id, project_id, exp_id, _ = _world(engine)
    with engine.begin() as conn:
        model_id = conn.execute(sa.insert(t.models).values(
            name="m", description="", labels=[], meta={}, notes="", workspace_id=ws_id, user_id=user_id,
            archived=False, created_at=NOW, updated_at=NOW).returning(t.models.c.id)).scalar_one()
        conn.execute(sa.insert(t.jobs).values(job_id="job-1", job_type="NOTEBOOK", submitted_at=NOW,
                                              owner_id=user_id, priority=42, weight=1.0, queue_position=0.0))
        conn.execute(sa.insert(t.commands).values(
            task_id="nb-1", job_id="job-1", task_type="NOTEBOOK", owner_id=user_id, workspace_id=ws_id,
            description="nb", config={}, start_time=NOW, end_time=None))
        rbac.add_assignment(conn, "Editor", user_id, None, ws_id)
        ws.set_pin(conn, ws_id, user_id, NOW)
    with engine.begin() as conn:
        assert ws.running_task(conn, ws_id) == "nb-1"
        assert rbac.task_location(conn, "nb-1") == (ws_id, None)
        conn.execute(sa.update(t.commands).values(end_time=NOW + 1))
        assert ws.running_task(conn, ws_id) is None
        assert ws.projects_of(conn, ws_id) == [project_id] and ws.experiments_of(conn, [project_id]) == [exp_id]
        ws.delete_models(conn, ws_id)
        assert conn.execute(sa.select(t.models).where(t.models.c.id == model_id)).first() is None
        ws.delete_tasks(conn, ws_id)
        assert conn.execute(sa.select(t.commands)).first() is None and conn.execute(sa.select(t.jobs)).first() is None
        ws.delete_templates(conn, ws_id)
    # The experiments go with the purge (``services.experiments.purge``); here, straight.
    with engine.begin() as conn:
        conn.execute(sa.delete(t.trials))
        conn.execute(sa.delete(t.experiments))
        ws.delete_projects(conn, [project_id])
        ws.delete_workspace(conn, ws_id)
    with engine.connect() as conn:
        assert ws.workspace(conn, ws_id) is None and ws.project(conn, project_id) is None
        assert rbac.assignments(conn, user_id=user_id, group_id=None, workspace_id=None, any_scope=True) == []
