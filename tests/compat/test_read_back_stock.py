"""Issue 27, reading back: the stock ``determined==0.38.1`` SDK reads a finished trial's
metrics (``Trial.iter_metrics``, ``client.iter_trials_metrics``, the deprecated
``stream_trials_training_metrics``/``…_validation_metrics``) and a task's state
(``GET /api/v1/tasks/{id}``, what ``det notebook start`` waits on), on both backends, and a
user who may not see the experiment gets a 404 through the same calls."""

from __future__ import annotations

import json

import pytest

from tests._master import ADMIN_PASSWORD, MasterProcess, create_experiment

from .fixtures import _flows as f

pytestmark = pytest.mark.compat
TERMINAL = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}

_READ = """
import json, sys
from determined.common import api
from determined.common.api import bindings
from determined.experimental import client

master, user, password, tid, task_id = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
client.login(master=master, user=user, password=password)
out = {}
try:
    t = client.get_trial(tid)
    out["training"] = [(m.steps_completed, m.metrics, m.group, m.trial_id) for m in t.iter_metrics("training")]
    out["validation"] = [(m.steps_completed, m.metrics) for m in t.iter_metrics("validation")]
    out["many"] = [(m.trial_id, m.steps_completed) for m in client.iter_trials_metrics([tid], group="validation")]
    out["legacy_training"] = [m.steps_completed for m in client.stream_trials_training_metrics([tid])]
    out["legacy_validation"] = [(m.steps_completed, m.metrics) for m in client.stream_trials_validation_metrics([tid])]
    task = bindings.get_GetTask(client._determined._session, taskId=task_id).task
    out["task"] = task.to_json()
except api.errors.APIException as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def _read(det_env, master: MasterProcess, user: str, password: str, tid: int, task_id: str) -> dict:
    res = det_env.run_python(_READ, args=[master.url, user, password, str(tid), task_id])
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_the_stock_sdk_reads_metrics_and_tasks_back(det_env, any_master: MasterProcess) -> None:
    master = any_master
    client = master.admin()
    exp = create_experiment(client, f.steps_config(det_env.python, name="read-back", length=10), f.STEPS_DIR)
    exp_id = exp["experiment"]["id"]
    t = f.only_trial(client, exp_id)
    assert f.wait_state(client, exp_id, TERMINAL, timeout=90) == "STATE_COMPLETED"
    tid = t["id"]
    task_id = t["taskId"]

    # What the master stored, read through its own workloads route: the independent answer.
    work = f.workloads(client, tid)
    training = [(w["training"]["totalBatches"], w["training"]["metrics"]["avgMetrics"]) for w in work if "training" in w]
    validation = [(w["validation"]["totalBatches"], w["validation"]["metrics"]["avgMetrics"])
                  for w in work if "validation" in w]
    assert len(training) == 10 and len(validation) == 2

    out = _read(det_env, master, "admin", ADMIN_PASSWORD, tid, task_id)
    assert "error" not in out, out
    assert [(s, m) for s, m, _, _ in out["training"]] == training
    assert {g for _, _, g, _ in out["training"]} == {"training"}
    assert {i for _, _, _, i in out["training"]} == {tid}
    assert [tuple(x) for x in out["validation"]] == validation
    assert [tuple(x) for x in out["many"]] == [(tid, s) for s, _ in validation]
    assert out["legacy_training"] == [s for s, _ in training]
    assert [tuple(x) for x in out["legacy_validation"]] == validation

    task = out["task"]
    assert task["taskId"] == task_id and task["taskType"] == "TASK_TYPE_TRIAL"
    assert task["endTime"] and task["allocations"]
    assert all(a["state"] == "STATE_TERMINATED" and a["taskId"] == task_id for a in task["allocations"])

    # Someone who may not see the experiment: not found, through the same stock calls.
    client.post("/api/v1/users", {"user": {"username": "outsider", "active": True},
                                  "password": "Outsider-Passw0rd"})
    ws = client.post("/api/v1/workspaces", {"name": "private-space"})["workspace"]["id"]
    proj = client.post(f"/api/v1/workspaces/{ws}/projects", {"name": "p"})["project"]["id"]
    client.post(f"/api/v1/experiments/{exp_id}/move", {"destinationProjectId": proj, "experimentId": exp_id})
    denied = _read(det_env, master, "outsider", "Outsider-Passw0rd", tid, task_id)
    assert denied.get("error", "").startswith("NotFoundException"), denied


def test_metrics_routes_refuse_what_they_cannot_answer(master: MasterProcess) -> None:
    from tests._master import ApiError
    client = master.admin()
    for path, words in (("/api/v1/trials/metrics/trial_metrics?trialIds=1", "group"),
                        ("/api/v1/trials/metrics/training_metrics", "trialIds"),
                        ("/api/v1/trials/metrics/validation_metrics?trialIds=", "trialIds"),
                        ("/api/v1/trials/metrics/training_metrics?trialIds=x", "trialIds")):
        with pytest.raises(ApiError) as err:
            client.get(path)
        assert err.value.status == 400 and words in err.value.body["message"], (path, err.value.body)
    with pytest.raises(ApiError) as err:
        client.get("/api/v1/trials/metrics/training_metrics?trialIds=999")
    assert err.value.status == 404
    with pytest.raises(ApiError) as err:
        client.get("/api/v1/tasks/no-such-task")
    assert err.value.status == 404


def test_the_stock_notebook_start_waits_for_the_task_to_be_ready(det_env, master: MasterProcess) -> None:
    """``det notebook start`` polls ``GET /api/v1/tasks/{id}`` until its allocation
    ``isReady`` (the proxy's probe answered), then prints where the notebook runs."""
    res = det_env.det(["notebook", "start", "--no-browser", "--config", "resources.slots=0"], master.url,
                      user="admin", password=ADMIN_PASSWORD, timeout=180)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "is ready" in res.stdout, res.stdout
    nb = res.stdout.split("(id: ", 1)[1].split(",", 1)[0]
    client = master.admin()
    task = client.get(f"/api/v1/tasks/{nb}")["task"]
    assert task["taskType"] == "TASK_TYPE_NOTEBOOK" and "endTime" not in task
    assert [a["isReady"] for a in task["allocations"]] == [True]
    client.post(f"/api/v1/notebooks/{nb}/kill")
