"""Issue 27: the stock SDK's ``Checkpoint.add_metadata`` / ``remove_metadata``
(``POST /api/v1/checkpoints/{uuid}/metadata``): the metadata changes on the master, the files in
storage do not, and only those who may edit the experiment may change it."""

from __future__ import annotations

import json

import pytest

from tests._master import ADMIN_PASSWORD, ApiError, Client, MasterProcess, create_experiment

from .fixtures import _flows as f

pytestmark = pytest.mark.compat
TERMINAL = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}

_EDIT = """
import json, sys
from determined.experimental import client

master, password, uuid = sys.argv[1], sys.argv[2], sys.argv[3]
client.login(master=master, user="admin", password=password)
ckpt = client.get_checkpoint(uuid)
ckpt.add_metadata({"note": "best so far", "epochs": 3})
ckpt.remove_metadata(["epochs"])
print(json.dumps(client.get_checkpoint(uuid).metadata))
"""


def test_the_stock_sdk_edits_checkpoint_metadata(det_env, master: MasterProcess) -> None:
    client = master.admin()
    exp_id = create_experiment(client, f.steps_config(det_env.python, name="ckpt-meta", length=5),
                               f.STEPS_DIR)["experiment"]["id"]
    trial = f.only_trial(client, exp_id)
    assert f.wait_state(client, exp_id, TERMINAL, timeout=90) == "STATE_COMPLETED"
    ckpt = f.checkpoints(client, trial["id"])[0]
    stored = f.ckpt_dir(master) / ckpt["uuid"] / "state.json"
    before_files = stored.read_text()

    res = det_env.run_python(_EDIT, args=[master.url, ADMIN_PASSWORD, ckpt["uuid"]])
    assert res.returncode == 0, res.stderr[-3000:]
    metadata = json.loads(res.stdout.strip().splitlines()[-1])
    assert metadata["note"] == "best so far" and "epochs" not in metadata
    assert metadata["steps_completed"] == ckpt["metadata"]["steps_completed"]  # the rest is kept
    assert client.get(f"/api/v1/checkpoints/{ckpt['uuid']}")["checkpoint"]["metadata"] == metadata
    assert stored.read_text() == before_files

    # not an object: 400; a stranger to the workspace: 404; nothing changes
    with pytest.raises(ApiError) as err:
        client.post(f"/api/v1/checkpoints/{ckpt['uuid']}/metadata", {"checkpoint": {"metadata": [1]}})
    assert err.value.status == 400
    ws = client.post("/api/v1/workspaces", {"name": "closed"})["workspace"]["id"]
    proj = client.post(f"/api/v1/workspaces/{ws}/projects", {"name": "p"})["project"]["id"]
    client.post(f"/api/v1/experiments/{exp_id}/move", {"destinationProjectId": proj, "experimentId": exp_id})
    client.post("/api/v1/users", {"user": {"username": "stranger", "active": True}, "password": "Stranger-Passw0rd"})
    stranger = Client(master.url, master.login("stranger", "Stranger-Passw0rd"))
    with pytest.raises(ApiError) as err:
        stranger.post(f"/api/v1/checkpoints/{ckpt['uuid']}/metadata", {"checkpoint": {"metadata": {}}})
    assert err.value.status == 404
    assert client.get(f"/api/v1/checkpoints/{ckpt['uuid']}")["checkpoint"]["metadata"] == metadata
