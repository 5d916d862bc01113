"""Issue 27: ``Checkpoint.get_metrics`` and ``ModelVersion.get_metrics`` of the stock
``determined==0.38.1`` SDK, on both backends.

0.38.1's semantics (``trial_source_infos``): a task that used a checkpoint or a model version
says so (``core_context.experimental.report_task_using_checkpoint`` /
``report_task_using_model_version``, ``POST /api/v1/trial-source-info``), and the metrics that
task reports are what the checkpoint's and the version's ``get_metrics()`` return. A linked
trial the reader may not see is left out, not refused. Here a training run makes a checkpoint,
alice registers it as a model version, an "inference" run links both and reports its own
metrics, and the stock SDK reads them back against the values the run reported.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._master import ApiError, Client, MasterProcess

pytestmark = pytest.mark.compat
PW = "Ckpt-Metrics-Passw0rd"

_TRAIN = r"""
import json, sys
from determined.experimental import core_v2
core_v2.init(config=core_v2.Config(name="train-run", checkpoint_storage=sys.argv[1],
                                   external_experiment_id="ckm-train", external_trial_id="t"))
core_v2.train.report_training_metrics(steps_completed=5, metrics={"loss": 0.5})
with core_v2.checkpoint.store_path({"steps_completed": 5}) as (path, uuid):
    (path / "w.txt").write_text("weights")
out = {"uuid": str(uuid)}
core_v2.close()
print("RESULT " + json.dumps(out))
"""

_INFER = r"""
import json, sys
from determined import core
from determined.experimental import client, core_v2
uuid, model = sys.argv[2], sys.argv[3]
core_v2.init(config=core_v2.Config(name="infer-run", checkpoint_storage=sys.argv[1],
                                   external_experiment_id="ckm-infer", external_trial_id="t"))
tid = core_v2.info.trial.trial_id
ctx = core.ExperimentalCoreContext(client._get_singleton_session(), tid)
ctx.report_task_using_checkpoint(client.get_checkpoint(uuid))
ctx.report_task_using_model_version(client.get_model(model).get_version(1))
for step in (1, 2, 3):
    core_v2.train.report_training_metrics(steps_completed=step, metrics={"acc": step / 10})
core_v2.train.report_validation_metrics(steps_completed=3, metrics={"vacc": 0.9})
core_v2.close()
print("RESULT " + json.dumps({"trial_id": tid, "experiment_id": core_v2.info.trial.experiment_id
                              if core_v2.info else None}))
"""

_READ = r"""
import json, sys
from determined.experimental import client
uuid, model = sys.argv[1], sys.argv[2]
client.login()
ck = client.get_checkpoint(uuid)
mv = client.get_model(model).get_version(1)
rows = lambda ms: [(m.trial_id, m.group, m.steps_completed, m.metrics) for m in ms]
print("RESULT " + json.dumps({
    "ck_training": rows(ck.get_metrics("training")),
    "ck_validation": rows(ck.get_metrics("validation")),
    "mv_training": rows(mv.get_metrics("training")),
    "mv_all": len(list(mv.get_metrics())),
}))
"""


def _result(res) -> dict:
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    line = next(x for x in reversed(res.stdout.splitlines()) if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _user(master: MasterProcess, name: str) -> Client:
    master.admin().post("/api/v1/users", {"user": {"username": name, "active": True}, "password": PW})
    return Client(master.url, master.login(name, PW))


def _env(master: MasterProcess, user: str) -> dict[str, str]:
    return {"DET_MASTER": master.url, "DET_USER": user, "DET_PASS": PW}


def test_checkpoint_and_model_version_metrics_read_back(det_env, any_master: MasterProcess,
                                                        tmp_path: Path) -> None:
    master = any_master
    alice = _user(master, "alice")
    ck = str(tmp_path / "checkpoints")
    uuid = _result(det_env.run_python(_TRAIN, args=[ck], env_extra=_env(master, "alice")))["uuid"]
    alice.post("/api/v1/models", {"name": "ckm-model"})
    alice.post("/api/v1/models/ckm-model/versions", {"modelName": "ckm-model", "checkpointUuid": uuid})

    # Nothing linked yet: empty, not an error.
    assert alice.get(f"/api/v1/checkpoints/{uuid}/metrics")["metrics"] == []

    infer = _result(det_env.run_python(_INFER, args=[ck, uuid, "ckm-model"], env_extra=_env(master, "alice")))
    tid = infer["trial_id"]
    # Expected from what the run reported (not from the route under test).
    training = [[tid, "training", s, {"acc": s / 10}] for s in (1, 2, 3)]
    validation = [[tid, "validation", 3, {"vacc": 0.9}]]

    out = _result(det_env.run_python(_READ, args=[uuid, "ckm-model"], env_extra=_env(master, "alice")))
    assert out["ck_training"] == training
    assert out["ck_validation"] == validation
    assert out["mv_training"] == training
    assert out["mv_all"] == 4  # every group, through the stock all-groups read
    # The training run itself is not linked to its own checkpoint.
    assert {m["trialId"] for m in alice.get(f"/api/v1/checkpoints/{uuid}/metrics")["metrics"]} == {tid}
    typed = alice.get(f"/api/v1/checkpoints/{uuid}/metrics?trialSourceInfoType=TRIAL_SOURCE_INFO_TYPE_FINE_TUNING")
    assert typed["metrics"] == []

    # bob may see the checkpoint but not the inference run once it is in alice's own
    # workspace: the run's metrics are left out for him (0.38.1), and he cannot link his way in.
    admin = master.admin()
    exp_id = alice.get(f"/api/v1/trials/{tid}")["trial"]["experimentId"]
    ws = admin.post("/api/v1/workspaces", {"name": "alice-private"})["workspace"]["id"]
    proj = admin.post(f"/api/v1/workspaces/{ws}/projects", {"name": "p"})["project"]["id"]
    admin.post(f"/api/v1/experiments/{exp_id}/move", {"destinationProjectId": proj, "experimentId": exp_id})
    bob = _user(master, "bob")
    assert bob.get(f"/api/v1/checkpoints/{uuid}/metrics")["metrics"] == []
    assert len(admin.get(f"/api/v1/checkpoints/{uuid}/metrics")["metrics"]) == 4
    with pytest.raises(ApiError) as err:
        bob.post("/api/v1/trial-source-info", {"trialSourceInfo": {
            "checkpointUuid": uuid, "trialId": tid, "trialSourceInfoType": "TRIAL_SOURCE_INFO_TYPE_INFERENCE"}})
    assert err.value.status == 404

    # Bad input: a 4xx naming the problem, nothing stored.
    with pytest.raises(ApiError) as err:
        admin.post("/api/v1/trial-source-info", {"trialSourceInfo": {
            "checkpointUuid": "0b0b0b0b-0000-0000-0000-000000000000", "trialId": tid,
            "trialSourceInfoType": "TRIAL_SOURCE_INFO_TYPE_INFERENCE"}})
    assert err.value.status == 404 and "checkpoint" in str(err.value)
    with pytest.raises(ApiError) as err:
        admin.post("/api/v1/trial-source-info", {"trialSourceInfo": {
            "checkpointUuid": uuid, "trialId": tid, "trialSourceInfoType": "INFERENCE"}})
    assert err.value.status == 400 and "trialSourceInfoType" in str(err.value)
    with pytest.raises(ApiError) as err:
        admin.get("/api/v1/checkpoints/0b0b0b0b-0000-0000-0000-000000000000/metrics")
    assert err.value.status == 404
    with pytest.raises(ApiError) as err:
        admin.get("/api/v1/models/ckm-model/versions/7/metrics")
    assert err.value.status == 404
