"""The checkpoint and model registry stores (``store.checkpoints``, ``store.registry``) on each
backend, without the services: what each write stores and each read gives back."""

from __future__ import annotations

import sqlalchemy as sa

from det_jupyter.store import checkpoints as ckstore
from det_jupyter.store import registry
from det_jupyter.store import tables as t
from det_jupyter.store.metrics import Report, append, read_trial

from ._rows import NOW, make_trial, make_world

COLLECTABLE = ("COMPLETED",)


def _insert(conn: sa.Connection, uuid: str, trial_id: int, exp_id: int, steps: int) -> None:
    ckstore.insert_completed(conn, uuid=uuid, trial_id=trial_id, experiment_id=exp_id, task_id="task",
                             allocation_id="task.1", report_time=NOW + steps, resources={"a.pt": "3"},
                             metadata={"steps_completed": steps}, steps_completed=steps, storage_id=None)


def _model(conn: sa.Connection, name: str, user_id: int) -> registry.ModelRecord:
    registry.insert_model(conn, {"name": name, "description": "d", "labels": ["x"], "meta": {}, "notes": "",
                                 "workspace_id": 1, "user_id": user_id, "archived": False,
                                 "created_at": 1.0, "updated_at": 1.0})
    found = registry.model(conn, name)
    assert found is not None
    return found


def test_checkpoints_stored_read_and_latest(engine: sa.Engine) -> None:
    _, exp_id, tid = make_world(engine)
    with engine.begin() as conn:
        assert ckstore.experiment_of_trial(conn, tid) == exp_id and ckstore.experiment_of_trial(conn, 10**6) is None
        assert ckstore.latest_step(conn, tid) is None
        for uuid, steps in (("c-20", 20), ("c-10", 10)):
            _insert(conn, uuid, tid, exp_id, steps)
        ckstore.set_latest(conn, tid, "c-20")
        trial = read_trial(conn, tid)
        assert trial is not None
        append(conn, trial, [Report("validation", 20, {"loss": 0.5}, 1.0), Report("training", 20, {"loss": 0.7}, 1.0)],
               None)
    with engine.connect() as conn:
        assert ckstore.exists(conn, "c-10") and not ckstore.exists(conn, "nope")
        assert ckstore.latest_step(conn, tid) == 20
        row = ckstore.get(conn, "c-10")
        assert row is not None and (row.state, row.resources, row.steps_completed) == ("COMPLETED", {"a.pt": "3"}, 10)
        assert ckstore.get(conn, "nope") is None
        assert [r.uuid for r in ckstore.of_trial(conn, tid)] == ["c-10", "c-20"]
        assert [r.uuid for r in ckstore.of_experiment(conn, exp_id)] == ["c-10", "c-20"]
        listed = {r.uuid: r for r in ckstore.with_reports(conn, experiment_id=exp_id)}
        assert listed["c-10"].validation_body is None and listed["c-10"].training_id is None
        assert '"loss":0.5' in listed["c-20"].validation_body and '"loss":0.7' in listed["c-20"].training_body
        assert [r.uuid for r in ckstore.with_reports(conn, uuid="c-20")] == ["c-20"]
        assert {r.uuid for r in ckstore.with_reports(conn, trial_id=tid)} == {"c-10", "c-20"}
        (validation,) = ckstore.validations_of_collectable(conn, exp_id, COLLECTABLE)
        assert (validation.trial_id, validation.steps_completed) == (tid, 20)
        assert {r.uuid for r in ckstore.collectable(conn, exp_id, COLLECTABLE)} == {"c-10", "c-20"}
        assert [(r.id, r.latest_checkpoint) for r in ckstore.trials_of_collectable(conn, exp_id, COLLECTABLE)] == [
            (tid, "c-20")]
        assert ckstore.experiment_config(conn, exp_id)["searcher"]["metric"] == "loss"
    with engine.begin() as conn:
        assert ckstore.set_metadata(conn, "c-10", {"k": "v"}) and not ckstore.set_metadata(conn, "nope", {})
        assert ckstore.get(conn, "c-10").ckpt_metadata == {"k": "v"}


def test_storages_are_stored_once_by_key(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        assert ckstore.storage_id(conn, "key") is None
        sid = ckstore.add_storage(conn, "key", {"type": "shared_fs"})
        assert ckstore.storage_id(conn, "key") == sid


def test_what_protects_a_checkpoint_and_its_deletion(engine: sa.Engine) -> None:
    user_id, exp_id, tid = make_world(engine)
    other = make_trial(engine, exp_id)
    uuids = [f"c-{i}" for i in range(3)]
    with engine.begin() as conn:
        for i, uuid in enumerate(uuids):
            _insert(conn, uuid, tid if i < 2 else other, exp_id, i)
        ckstore.set_latest(conn, tid, "c-1")
        model = _model(conn, "m", user_id)
        registry.insert_version(conn, {"model_id": model.id, "version": 1, "checkpoint_uuid": "c-0", "name": "",
                                       "comment": "", "labels": [], "meta": {}, "notes": "", "user_id": user_id,
                                       "created_at": 1.0, "updated_at": 1.0})
    # Past one chunk of uuids: a request of thousands stays in every backend's parameter limit.
    many = uuids + [f"absent-{i}" for i in range(1_200)]
    with engine.begin() as conn:
        assert ckstore.registered(conn, many) == {"c-0"}
        assert ckstore.latest_of_trials_in(conn, many, ["COMPLETED", "CANCELED", "ERROR"]) == {"c-1": tid}
        assert ckstore.latest_of_trials_in(conn, many, ["ACTIVE"]) == {}
        assert [(u.checkpoint_uuid, u.name, u.version) for u in ckstore.version_uses(conn, {"c-0"})] == [("c-0", "m", 1)]
        configs = ckstore.experiment_configs(conn, many)
        assert set(configs) == set(uuids) and configs["c-2"]["searcher"]["metric"] == "loss"
        assert sorted(ckstore.lock_in_states(conn, many, COLLECTABLE)) == uuids
        ckstore.mark_deleted(conn, ["c-2"])
        ckstore.record_files(conn, "c-2", {}, None)  # a DELETED one keeps what it had
        ckstore.record_files(conn, "c-1", {"b.pt": "1"}, "PARTIALLY_DELETED")
    with engine.connect() as conn:
        states = dict(conn.execute(sa.select(t.checkpoints.c.uuid, t.checkpoints.c.state)).all())
        assert states == {"c-0": "COMPLETED", "c-1": "PARTIALLY_DELETED", "c-2": "DELETED"}
        assert ckstore.get(conn, "c-2").resources == {"a.pt": "3"}
        assert ckstore.get(conn, "c-1").resources == {"b.pt": "1"}
        assert ckstore.lock_in_states(conn, uuids, COLLECTABLE) == ["c-0"]


def test_models_and_versions(engine: sa.Engine) -> None:
    user_id, exp_id, tid = make_world(engine)
    with engine.begin() as conn:
        _insert(conn, "c-1", tid, exp_id, 1)
        first = _model(conn, "first", user_id)
        second = _model(conn, "second 50%", user_id)
        registry.update_model(conn, second.id, {"labels": ["x", "y"], "archived": True})
        assert registry.lock_model(conn, first.id) is False and registry.lock_model(conn, 10**6) is None
        assert registry.lock_completed_checkpoint(conn, "c-1") and not registry.lock_completed_checkpoint(conn, "no")
        assert registry.checkpoint_state(conn, "c-1") == "COMPLETED" and registry.checkpoint_state(conn, "no") is None
        assert registry.last_version(conn, first.id) == 0
        for number, created in ((1, 5.0), (2, 3.0)):
            registry.insert_version(conn, {"model_id": first.id, "version": number, "checkpoint_uuid": "c-1",
                                           "name": f"v{number}", "comment": "", "labels": [], "meta": {"n": number},
                                           "notes": "", "user_id": user_id, "created_at": created,
                                           "updated_at": created})
    with engine.begin() as conn:
        assert registry.last_version(conn, first.id) == 2
        assert registry.model_named(conn, "first") == first.id and registry.model_named(conn, "x") is None
        uncategorized = conn.execute(sa.select(t.workspaces.c.name).where(t.workspaces.c.id == 1)).scalar_one()
        assert registry.workspace_named(conn, uncategorized) == 1 and registry.workspace_archived(conn, 1) is False
        assert registry.workspace_archived(conn, 10**6) is None
        found = registry.model(conn, first.id)
        assert found is not None and (found.num_versions, found.username != "", found.workspace_name) == (
            2, True, uncategorized)
        assert [m.name for m in registry.models(conn)] == ["first", "second 50%"]
        assert [m.name for m in registry.models(conn, name="50%")] == ["second 50%"]  # escaped, not a wildcard
        assert [m.name for m in registry.models(conn, archived=False, visible={1})] == ["first"]
        assert registry.models(conn, visible=set()) == []
        assert sorted(map(tuple, registry.labels_of_models(conn, None))) == [("x",), ("x", "y")]
        assert [v.version for v in registry.versions(conn, found)] == [1, 2]
        assert [v.version for v in registry.versions(conn, found, by_creation=True)] == [2, 1]
        version = registry.version(conn, found, 2)
        assert version is not None and (version.name, version.metadata, version.model) == ("v2", {"n": 2}, found)
        registry.update_version(conn, first.id, 2, {"comment": "better"})
        assert registry.version(conn, found, 2).comment == "better"
        assert registry.delete_version(conn, first.id, 2) and not registry.delete_version(conn, first.id, 2)
        registry.delete_model(conn, first.id)
        assert registry.model(conn, "first") is None and registry.versions(conn, found) == []
