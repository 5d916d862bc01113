"""Issue 27, unmanaged runs: the stock ``determined==0.38.1`` ``core_v2`` tracks a script that
runs outside the cluster (a notebook cell, a laptop script) in the master, on both backends.

The script, run by a plain user with its own login, records training and validation metrics
and checkpoints (into a ``directory`` storage it names); the run is listed as an unmanaged
experiment, its metrics read back through the stock SDK, its checkpoints listed and
downloaded, ``det e list`` shows it. A second ``core_v2.init`` with the same external ids
continues the same trial (a new run, the latest checkpoint handed back and restored); a
third that starts over replaces what the earlier runs reported from its first step on (0.38.1's
rollback). Nothing is ever scheduled: the trial's task has no allocation. Someone who may not
edit the experiment gets a 404 through the same stock call, and bad input gets a 400 naming the
field.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._master import ApiError, Client, MasterProcess

from .fixtures import _flows as f

pytestmark = pytest.mark.compat
PW = "Unmanaged-Passw0rd"

_RUN = r"""
import json, sys
from determined.experimental import core_v2

ck, ext_exp, ext_trial, mode = sys.argv[1:5]
core_v2.init(config=core_v2.Config(
    name="notebook-run", hparams={"lr": 0.1}, checkpoint_storage=ck, labels=["notebook"],
    external_experiment_id=ext_exp, external_trial_id=ext_trial))
info = core_v2.info
out = {"trial_id": info.trial.trial_id, "experiment_id": info.trial.experiment_id,
       "run_id": info.trial._trial_run_id, "steps": info.trial._steps_completed,
       "latest": info.latest_checkpoint, "task_id": info.task_id}
if info.latest_checkpoint and mode == "continue":
    with core_v2.checkpoint.restore_path(info.latest_checkpoint) as path:
        out["restored"] = json.loads((path / "state.json").read_text())
first, last = {"first": (1, 10), "continue": (11, 15), "rerun": (1, 3)}[mode]
for step in range(first, last + 1):
    core_v2.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step, "run": out["run_id"]})
if mode != "rerun":
    core_v2.train.report_validation_metrics(steps_completed=last, metrics={"vloss": 0.5 / last})
    with core_v2.checkpoint.store_path({"steps_completed": last}) as (path, uuid):
        (path / "state.json").write_text(json.dumps({"step": last}))
    out["uuid"] = str(uuid)
print("PRINTED-BY-THE-RUN", mode)
core_v2.close()
print("RESULT " + json.dumps(out))
"""

_READ = r"""
import json, sys, tempfile, pathlib
from determined.experimental import client

exp_id, tid = int(sys.argv[1]), int(sys.argv[2])
client.login()
exps = [e for e in client.list_experiments() if e.id == exp_id]
t = client.get_trial(tid)
out = {
    "listed": [(e.id, e.name, e.state.value) for e in exps],
    "training": [(m.steps_completed, m.metrics) for m in t.iter_metrics("training")],
    "validation": [(m.steps_completed, m.metrics) for m in t.iter_metrics("validation")],
}
ckpts = client.get_experiment(exp_id).list_checkpoints()
out["checkpoints"] = sorted((c.metadata["steps_completed"], c.uuid) for c in ckpts)
downloaded = {}
for c in ckpts:
    target = pathlib.Path(tempfile.mkdtemp()) / c.uuid
    c.download(str(target))
    downloaded[c.uuid] = json.loads((target / "state.json").read_text())
out["downloaded"] = downloaded
print("RESULT " + json.dumps(out))
"""


def _result(res) -> dict:
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    line = next(x for x in reversed(res.stdout.splitlines()) if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _user(master: MasterProcess, name: str) -> Client:
    admin = master.admin()
    admin.post("/api/v1/users", {"user": {"username": name, "active": True}, "password": PW})
    return Client(master.url, master.login(name, PW))


def _run(det_env, master: MasterProcess, user: str, ck: Path, mode: str, ext_exp: str = "nb-exp-1"):
    return det_env.run_python(_RUN, args=[str(ck), ext_exp, "trial-a", mode],
                              env_extra={"DET_MASTER": master.url, "DET_USER": user, "DET_PASS": PW})


def test_a_notebook_run_is_tracked_continued_and_read_back(det_env, any_master: MasterProcess,
                                                           tmp_path: Path) -> None:
    master = any_master
    alice = _user(master, "alice")
    ck = tmp_path / "checkpoints"

    first = _result(_run(det_env, master, "alice", ck, "first"))
    exp_id, tid = first["experiment_id"], first["trial_id"]
    assert (first["run_id"], first["steps"], first["latest"]) == (1, 0, None)
    exp = alice.get(f"/api/v1/experiments/{exp_id}")["experiment"]
    assert (exp["state"], exp["unmanaged"], exp["name"], exp["username"]) == \
        ("STATE_COMPLETED", True, "notebook-run", "alice")
    assert exp["externalExperimentId"] == "nb-exp-1" and exp["labels"] == ["notebook"]
    assert exp["progress"] == 1.0 and exp["endTime"]
    trial = alice.get(f"/api/v1/trials/{tid}")["trial"]
    assert (trial["state"], trial["hparams"], trial["totalBatchesProcessed"]) == ("STATE_COMPLETED", {"lr": 0.1}, 10)

    # The same external ids: the same experiment and trial, a new run that resumes where the
    # latest checkpoint left it.
    second = _result(_run(det_env, master, "alice", ck, "continue"))
    assert (second["experiment_id"], second["trial_id"], second["run_id"]) == (exp_id, tid, 2)
    assert (second["latest"], second["steps"]) == (first["uuid"], 10)
    assert second["restored"] == {"step": 10}
    assert alice.get(f"/api/v1/experiments/{exp_id}")["experiment"]["state"] == "STATE_COMPLETED"

    out = _result(det_env.run_python(_READ, args=[str(exp_id), str(tid)], env_extra={
        "DET_MASTER": master.url, "DET_USER": "alice", "DET_PASS": PW}))
    assert out["listed"] == [[exp_id, "notebook-run", "STATE_COMPLETED"]]
    assert [s for s, _ in out["training"]] == list(range(1, 16))
    assert [m["run"] for _, m in out["training"]] == [1] * 10 + [2] * 5
    assert out["training"][3][1]["loss"] == pytest.approx(0.25)
    assert out["validation"] == [[10, {"vloss": 0.05}], [15, {"vloss": pytest.approx(0.5 / 15)}]]
    assert out["checkpoints"] == [[10, first["uuid"]], [15, second["uuid"]]]
    assert out["downloaded"] == {first["uuid"]: {"step": 10}, second["uuid"]: {"step": 15}}

    res = det_env.det(["e", "list"], master.url, user="alice", password=PW)
    assert res.returncode == 0 and "notebook-run" in res.stdout, res.stdout + res.stderr

    # What it printed reached the trial's logs.
    text = f.log_text(alice, tid)
    assert "PRINTED-BY-THE-RUN first" in text and "PRINTED-BY-THE-RUN continue" in text

    # A run that starts over: its reports replace the earlier runs' from its first step on.
    third = _result(_run(det_env, master, "alice", ck, "rerun"))
    assert third["run_id"] == 3 and third["latest"] == second["uuid"]
    work = alice.get(f"/api/v1/trials/{tid}/workloads")["workloads"]
    assert [(w["training"]["totalBatches"], w["training"]["metrics"]["avgMetrics"]["run"])
            for w in work if "training" in w] == [(1, 3), (2, 3), (3, 3)]
    assert not [w for w in work if "validation" in w]
    assert alice.get(f"/api/v1/trials/{tid}")["trial"]["totalBatchesProcessed"] == 3

    # Nothing was ever scheduled: the trial's task never had an allocation.
    task = alice.get(f"/api/v1/tasks/{first['task_id']}")["task"]
    assert task["taskType"] == "TASK_TYPE_TRIAL" and task["allocations"] == []
    assert "no such route" not in master.log()


def test_someone_who_may_not_edit_it_cannot_report_into_it(det_env, master: MasterProcess,
                                                           tmp_path: Path) -> None:
    alice = _user(master, "alice")
    first = _result(_run(det_env, master, "alice", tmp_path / "ck", "first", ext_exp="private-run"))
    exp_id, tid, task_id = first["experiment_id"], first["trial_id"], first["task_id"]
    admin = master.admin()
    ws = admin.post("/api/v1/workspaces", {"name": "alice-only"})["workspace"]["id"]
    proj = admin.post(f"/api/v1/workspaces/{ws}/projects", {"name": "p"})["project"]["id"]
    admin.post(f"/api/v1/experiments/{exp_id}/move", {"destinationProjectId": proj, "experimentId": exp_id})
    roles = {r["name"]: r["roleId"] for r in admin.post("/api/v1/roles/search", {"limit": 100})["roles"]}
    uid = alice.get("/api/v1/me")["user"]["id"]
    admin.post("/api/v1/roles/add-assignments", {"userRoleAssignments": [
        {"userId": uid, "roleAssignment": {"role": {"roleId": roles["Editor"]}, "scopeWorkspaceId": ws}}]})

    # The stock init by someone else, with alice's external ids: refused at the experiment.
    mallory = _user(master, "mallory")
    res = _run(det_env, master, "mallory", tmp_path / "ck2", "first", ext_exp="private-run")
    assert res.returncode != 0 and "NotFoundException" in res.stderr, res.stderr[-2000:]
    calls = [("POST", "/api/v1/trials", {"experimentId": exp_id, "unmanaged": True}),
             ("PUT", "/api/v1/trials", {"createTrialRequest": {"experimentId": exp_id, "unmanaged": True},
                                        "externalTrialId": "trial-a"}),
             ("POST", f"/api/v1/trials/{tid}/start", {"trialId": tid, "resume": True}),
             ("PATCH", f"/api/v1/trials/{tid}", {"trialId": tid, "state": "STATE_ERROR"}),
             ("POST", f"/api/v1/trials/{tid}/metrics", {"group": "training", "metrics": {
                 "trialId": tid, "trialRunId": 1, "stepsCompleted": 99, "metrics": {"avgMetrics": {"loss": 9}}}}),
             ("POST", "/api/v1/checkpoints", {"uuid": "0b0b0b0b-0000-0000-0000-000000000000", "taskId": task_id,
                                              "metadata": {"steps_completed": 99}, "resources": {}}),
             ("POST", "/task-logs", [{"task_id": task_id, "log": "forged\n"}])]
    for verb, path, body in calls:
        with pytest.raises(ApiError) as err:
            mallory.request(verb, path, body)
        assert err.value.status == 404, (verb, path, err.value)
    # A Viewer of the workspace sees it but may not change it.
    viewer = _user(master, "vic")
    vid = viewer.get("/api/v1/me")["user"]["id"]
    admin.post("/api/v1/roles/add-assignments", {"userRoleAssignments": [
        {"userId": vid, "roleAssignment": {"role": {"roleId": roles["Viewer"]}, "scopeWorkspaceId": ws}}]})
    for verb, path, body in calls:
        with pytest.raises(ApiError) as err:
            viewer.request(verb, path, body)
        assert err.value.status == 403, (verb, path, err.value)
    trial = admin.get(f"/api/v1/trials/{tid}")["trial"]
    assert (trial["state"], trial["totalBatchesProcessed"]) == ("STATE_COMPLETED", 10)
    assert "forged" not in f.log_text(admin, tid)


def test_bad_input_is_refused_naming_the_field(master: MasterProcess) -> None:
    admin = master.admin()
    cfg = "name: u\nsearcher: {name: single, metric: loss}\ncheckpoint_storage: {type: directory, container_path: /tmp/u}\n"
    exp = admin.post("/api/v1/experiments", {"config": cfg, "unmanaged": True})["experiment"]
    assert (exp["state"], exp["unmanaged"]) == ("STATE_PAUSED", True)
    eid = exp["id"]
    managed = admin.post("/api/v1/experiments", {"config": "entrypoint: python3 x.py\n" + cfg,
                                                 "activate": False})["experiment"]["id"]

    def refused(verb: str, path: str, body: object, status: int, *words: str) -> None:
        with pytest.raises(ApiError) as err:
            admin.request(verb, path, body)
        assert err.value.status == status, (path, err.value)
        message = err.value.body["message"] if isinstance(err.value.body, dict) else str(err.value.body)
        assert all(w in message for w in words), (path, message)

    refused("POST", "/api/v1/experiments", {"config": cfg}, 400, "entrypoint")  # managed: still needed
    refused("POST", "/api/v1/experiments", {"config": cfg + "seracher: {}\n", "unmanaged": True}, 400, "seracher")
    refused("PUT", "/api/v1/experiments/by-external-id/x", {"config": cfg}, 400, "unmanaged")
    refused("PUT", "/api/v1/experiments/by-external-id/a%09b", {"config": cfg, "unmanaged": True}, 400,
            "external experiment id")
    refused("POST", "/api/v1/trials", {"experimentId": eid}, 400, "unmanaged")
    refused("POST", "/api/v1/trials", {"experimentId": eid, "unmanaged": True, "hparams": []}, 400, "hparams")
    refused("POST", "/api/v1/trials", {"experimentId": managed, "unmanaged": True}, 400, "experimentId")
    refused("POST", "/api/v1/trials", {"experimentId": 10_000, "unmanaged": True}, 404)
    refused("PUT", "/api/v1/trials", {"createTrialRequest": {"experimentId": eid, "unmanaged": True},
                                      "externalTrialId": ""}, 400, "externalTrialId")
    tid = admin.post("/api/v1/trials", {"experimentId": eid, "unmanaged": True})["trial"]["id"]
    assert admin.get(f"/api/v1/trials/{tid}")["trial"]["state"] == "STATE_PAUSED"
    assert admin.post(f"/api/v1/trials/{tid}/start", {"trialId": tid}) == {"trialRunId": 1, "stepsCompleted": 0}
    refused("POST", f"/api/v1/trials/{tid}/start", {"trialId": tid}, 409, "already been started")
    refused("POST", f"/api/v1/trials/{tid}/start", {"trialId": tid + 1, "resume": True}, 400, "trialId")
    refused("PATCH", f"/api/v1/trials/{tid}", {"state": "STATE_STOPPING_KILLED"}, 400, "state")
    refused("PATCH", f"/api/v1/trials/{tid}", {"state": "RUNNING"}, 400, "state")
    assert admin.get(f"/api/v1/experiments/{eid}")["experiment"]["state"] == "STATE_RUNNING"
    # An unmanaged experiment is never activated (that would schedule its trials) nor paused.
    refused("POST", f"/api/v1/experiments/{eid}/activate", None, 409, "unmanaged")
    refused("POST", f"/api/v1/experiments/{eid}/pause", None, 409, "unmanaged")
    # Cancel or kill ends it and its open trials (a PAUSED one too).
    mtid = admin.post("/api/v1/trials", {"experimentId": eid, "unmanaged": True})["trial"]["id"]
    admin.post(f"/api/v1/experiments/{eid}/kill")
    assert admin.get(f"/api/v1/experiments/{eid}")["experiment"]["state"] == "STATE_CANCELED"
    assert {admin.get(f"/api/v1/trials/{i}")["trial"]["state"] for i in (tid, mtid)} == {"STATE_CANCELED"}
