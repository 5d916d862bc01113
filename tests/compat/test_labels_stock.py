"""Issue 27: the stock SDK's ``Experiment.add_label`` / ``remove_label`` (``PUT`` and
``DELETE /api/v1/experiments/{id}/labels/{label}``): idempotent, the label rules of a rename,
and only for those who may edit the experiment."""

from __future__ import annotations

import json

import pytest

from tests._master import ADMIN_PASSWORD, ApiError, Client, MasterProcess
from tests.integration._exp import submit_counter

pytestmark = pytest.mark.compat

_LABELS = """
import json, sys
from determined.common import api
from determined.experimental import client

master, user, password, exp_id = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
client.login(master=master, user=user, password=password)
exp = client.get_experiment(exp_id)
out = {}
def step(name, fn):
    try:
        fn()
        out[name] = sorted(exp.labels)
    except api.errors.APIException as exc:
        out[name] = f"{type(exc).__name__}: {exc}"
step("add", lambda: exp.add_label("good run"))
step("add_again", lambda: exp.add_label("good run"))
step("add_other", lambda: exp.add_label("v2"))
step("remove_missing", lambda: exp.remove_label("never"))
step("remove", lambda: exp.remove_label("good run"))
step("bad", lambda: exp.add_label("gpj.\u202eexe"))
# list_experiments(labels=...): those carrying every label given (the Go master's rule)
def listed(labels):
    return sorted(e.id for e in client.list_experiments(labels=labels))
out["listed"] = {"v2": listed(["v2"]), "v2+gone": listed(["v2", "good run"]), "v": listed(["v"])}
print(json.dumps(out))
"""


def _run(det_env, master: MasterProcess, user: str, password: str, exp_id: int) -> dict:
    res = det_env.run_python(_LABELS, args=[master.url, user, password, str(exp_id)])
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_the_stock_sdk_adds_and_removes_labels(det_env, any_master: MasterProcess) -> None:
    master = any_master
    client = master.admin()
    other = submit_counter(client, length=5)
    client.request("PATCH", f"/api/v1/experiments/{other}", {"labels": ["v2", "x"]})
    exp_id = submit_counter(client, length=5)
    out = _run(det_env, master, "admin", ADMIN_PASSWORD, exp_id)
    assert out["listed"] == {"v2": [other, exp_id], "v2+gone": [], "v": []}, out["listed"]
    assert out["add"] == ["good run"] and out["add_again"] == ["good run"]
    assert out["add_other"] == ["good run", "v2"] and out["remove_missing"] == ["good run", "v2"]
    assert out["remove"] == ["v2"]
    assert out["bad"].startswith("APIException") and "U+202E" in out["bad"], out["bad"]
    assert client.get(f"/api/v1/experiments/{exp_id}")["experiment"]["labels"] == ["v2"]

    # a user with no role in the experiment's workspace: not found, and nothing changes
    ws = client.post("/api/v1/workspaces", {"name": "team-only"})["workspace"]["id"]
    proj = client.post(f"/api/v1/workspaces/{ws}/projects", {"name": "p"})["project"]["id"]
    client.post(f"/api/v1/experiments/{exp_id}/move", {"destinationProjectId": proj, "experimentId": exp_id})
    client.post("/api/v1/users", {"user": {"username": "outsider", "active": True}, "password": "Outsider-Passw0rd"})
    res = det_env.run_python(_LABELS, args=[master.url, "outsider", "Outsider-Passw0rd", str(exp_id)])
    assert res.returncode != 0 and "NotFound" in res.stderr, res.stderr[-2000:]  # get_experiment
    outsider = Client(master.url, master.login("outsider", "Outsider-Passw0rd"))
    for verb in ("PUT", "DELETE"):
        with pytest.raises(ApiError) as err:
            outsider.request(verb, f"/api/v1/experiments/{exp_id}/labels/v2")
        assert err.value.status == 404
        # a label of non-ASCII digits is a label, not an id (it was a 500)
        with pytest.raises(ApiError) as err:
            client.request(verb, "/api/v1/experiments/999999/labels/%C2%B9")
        assert err.value.status == 404
    assert client.get(f"/api/v1/experiments/{exp_id}")["experiment"]["labels"] == ["v2"]
