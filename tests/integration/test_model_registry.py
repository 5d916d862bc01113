"""The model registry over REST against a real master: models, versions (real checkpoints of a
finished experiment), what may not be registered, and who may see and change what."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from det_jupyter.services.access.authz import ROLE_IDS
from tests._master import (
    ADMIN_PASSWORD,
    ApiError,
    Client,
    MasterProcess,
    create_experiment,
    wait_experiment,
)
from tests.conftest import backend_db_url
from tests.integration._exp import COUNTER, counter_config

PW = "Registry-Passw0rd"


@dataclass
class Registry:
    master: MasterProcess
    admin: Client
    exp_id: int
    ckpts: list[dict]  # the experiment's checkpoints, by steps


def _checkpoints(client: Client, exp_id: int) -> list[dict]:
    found = client.get(f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
    return sorted(found, key=lambda c: c["metadata"]["steps_completed"])


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def registry(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    m = MasterProcess(tmp_path_factory.mktemp("registry") / "master", db_url=backend_db_url(request)).start()
    try:
        admin = m.admin()
        cfg = yaml.safe_load(counter_config(length=15, sleep=0.01, ckpt_every=5))
        cfg["checkpoint_storage"] = {"type": "shared_fs", "host_path": str(m.data_dir / "checkpoints"),
                                     "save_trial_latest": 5}  # keep all three
        exp_id = create_experiment(admin, yaml.safe_dump(cfg), COUNTER)["experiment"]["id"]
        assert wait_experiment(admin, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}) == "STATE_COMPLETED"
        ckpts = _checkpoints(admin, exp_id)
        assert [c["metadata"]["steps_completed"] for c in ckpts] == [5, 10, 15]
        yield Registry(m, admin, exp_id, ckpts)
    finally:
        m.stop()


def _status(call: Any) -> int:
    try:
        call()
    except ApiError as exc:
        return exc.status
    return 200


def _message(call: Any) -> str:
    with pytest.raises(ApiError) as info:
        call()
    return str(info.value.body)


def test_create_list_describe_patch_archive_delete(registry: Registry) -> None:
    admin = registry.admin
    model = admin.post("/api/v1/models", {"name": "mnist cnn", "description": "digits",
                                          "labels": ["vision", "small"], "metadata": {"k": 1}})["model"]
    assert (model["name"], model["description"], model["labels"], model["metadata"]) == \
        ("mnist cnn", "digits", ["vision", "small"], {"k": 1})
    assert (model["workspaceId"], model["username"], model["numVersions"], model["archived"]) == \
        (1, "admin", 0, False)
    assert model["creationTime"].endswith("Z") and model["userId"] > 0

    # Looked up by its url-encoded name or by its id.
    quoted = urllib.parse.quote("mnist cnn")
    assert admin.get(f"/api/v1/models/{quoted}")["model"]["id"] == model["id"]
    assert admin.get(f"/api/v1/models/{model['id']}")["model"]["name"] == "mnist cnn"

    # Names are unique and must be usable in a path.
    assert _status(lambda: admin.post("/api/v1/models", {"name": "mnist cnn"})) == 409
    for bad in ("", "   ", "1234", "a/b"):
        assert _status(lambda b=bad: admin.post("/api/v1/models", {"name": b})) == 400
    assert _status(lambda: admin.post("/api/v1/models", {"name": "x", "labels": "a"})) == 400
    assert _status(lambda: admin.post("/api/v1/models", {"name": "x", "workspaceName": "nope"})) == 404

    admin.post("/api/v1/models", {"name": "other", "labels": ["tabular"]})
    names = lambda q="": [m["name"] for m in admin.get(f"/api/v1/models{q}")["models"]]  # noqa: E731
    assert names() == ["mnist cnn", "other"]
    assert names("?name=MNIST") == ["mnist cnn"]
    assert names("?labels=vision") == ["mnist cnn"]
    assert names("?sortBy=SORT_BY_NAME&orderBy=ORDER_BY_DESC") == ["other", "mnist cnn"]
    assert names("?users=admin&workspaceIds=1") == ["mnist cnn", "other"]
    page = admin.get("/api/v1/models?limit=1&offset=1")
    assert [m["name"] for m in page["models"]] == ["other"]
    assert page["pagination"] == {"offset": 1, "limit": 1, "startIndex": 1, "endIndex": 2, "total": 2}
    assert admin.get("/api/v1/model/labels")["labels"] == ["small", "tabular", "vision"]

    before = model["lastUpdatedTime"]
    time.sleep(0.01)
    patched = admin.request("PATCH", f"/api/v1/models/{quoted}", {
        "description": "handwritten digits", "labels": ["vision"], "metadata": {"k": 2},
        "notes": "# notes"})["model"]
    assert (patched["description"], patched["labels"], patched["metadata"], patched["notes"]) == \
        ("handwritten digits", ["vision"], {"k": 2}, "# notes")
    assert patched["lastUpdatedTime"] > before
    assert _status(lambda: admin.request("PATCH", "/api/v1/models/other", {"name": "mnist cnn"})) == 409
    renamed = admin.request("PATCH", "/api/v1/models/other", {"name": "tabular"})["model"]
    assert renamed["name"] == "tabular"
    assert _status(lambda: admin.get("/api/v1/models/other")) == 404

    admin.post(f"/api/v1/models/{quoted}/archive")
    assert admin.get(f"/api/v1/models/{quoted}")["model"]["archived"] is True
    assert names("?archived=false") == ["tabular"]
    msg = _message(lambda: admin.post(f"/api/v1/models/{quoted}/versions",
                                      {"checkpointUuid": registry.ckpts[-1]["uuid"]}))
    assert "archived" in msg and "unarchive" in msg
    admin.post(f"/api/v1/models/{quoted}/unarchive")
    assert admin.get(f"/api/v1/models/{quoted}")["model"]["archived"] is False

    for name in ("mnist cnn", "tabular"):
        admin.request("DELETE", f"/api/v1/models/{urllib.parse.quote(name)}")
    assert names() == []
    assert _status(lambda: admin.get(f"/api/v1/models/{quoted}")) == 404


def test_versions_number_themselves_and_carry_their_checkpoint(registry: Registry) -> None:
    admin = registry.admin
    c5, c10, c15 = (c["uuid"] for c in registry.ckpts)
    admin.post("/api/v1/models", {"name": "counter"})
    v1 = admin.post("/api/v1/models/counter/versions", {
        "checkpointUuid": c15, "name": "first", "comment": "best so far", "labels": ["prod"],
        "metadata": {"acc": 0.9}})["modelVersion"]
    assert (v1["version"], v1["name"], v1["comment"], v1["labels"], v1["metadata"]) == \
        (1, "first", "best so far", ["prod"], {"acc": 0.9})
    assert v1["checkpoint"]["uuid"] == c15 and v1["checkpoint"]["state"] == "STATE_COMPLETED"
    assert v1["checkpoint"]["training"]["experimentId"] == registry.exp_id
    assert v1["model"]["name"] == "counter" and v1["username"] == "admin"
    assert [admin.post("/api/v1/models/counter/versions", {"checkpointUuid": u})["modelVersion"]["version"]
            for u in (c10, c5)] == [2, 3]
    assert admin.get("/api/v1/models/counter")["model"]["numVersions"] == 3

    listed = admin.get("/api/v1/models/counter/versions?orderBy=ORDER_BY_DESC&limit=2")
    assert [v["version"] for v in listed["modelVersions"]] == [3, 2]
    assert listed["pagination"]["total"] == 3 and listed["model"]["name"] == "counter"
    assert admin.get("/api/v1/models/counter/versions/2")["modelVersion"]["checkpoint"]["uuid"] == c10

    patched = admin.request("PATCH", "/api/v1/models/counter/versions/2",
                            {"name": "second", "notes": "n"})["modelVersion"]
    assert (patched["name"], patched["notes"], patched["comment"]) == ("second", "n", "")
    admin.request("DELETE", "/api/v1/models/counter/versions/3")
    assert _status(lambda: admin.get("/api/v1/models/counter/versions/3")) == 404
    assert _status(lambda: admin.get("/api/v1/models/counter/versions/0")) == 404
    assert admin.post("/api/v1/models/counter/versions", {"checkpointUuid": c5})["modelVersion"]["version"] == 3

    assert _status(lambda: admin.post("/api/v1/models/counter/versions", {})) == 400
    assert _status(lambda: admin.post("/api/v1/models/counter/versions",
                                      {"checkpointUuid": "00000000-0000-0000-0000-000000000000"})) == 404
    # A registered checkpoint cannot be deleted.
    msg = _message(lambda: admin.request("DELETE", "/api/v1/checkpoints", {"checkpointUuids": [c15]}))
    assert "model counter version 1" in msg
    admin.request("DELETE", "/api/v1/models/counter")


def test_partial_and_deleted_checkpoints_are_never_registered(registry: Registry) -> None:
    admin = registry.admin
    c5, c10 = registry.ckpts[0]["uuid"], registry.ckpts[1]["uuid"]
    admin.post("/api/v1/models", {"name": "refuses"})
    ckpt_dir = registry.master.data_dir / "checkpoints" / c10
    (ckpt_dir / "extra.bin").write_bytes(b"x" * 10)
    admin.post("/api/v1/checkpoints/rm", {"checkpointUuids": [c10], "checkpointGlobs": ["extra.bin"]})
    partial = admin.get(f"/api/v1/checkpoints/{c10}")["checkpoint"]
    assert partial["state"] == "STATE_PARTIALLY_DELETED"
    assert "extra.bin" not in partial["resources"] and not (ckpt_dir / "extra.bin").exists()
    msg = _message(lambda: admin.post("/api/v1/models/refuses/versions", {"checkpointUuid": c10}))
    assert "PARTIALLY_DELETED" in msg and "COMPLETED" in msg
    for globs in (["../*"], ["/etc/passwd"], [""]):
        assert _status(lambda g=globs: admin.post("/api/v1/checkpoints/rm", {
            "checkpointUuids": [c10], "checkpointGlobs": g})) == 400
    assert _status(lambda: admin.post("/api/v1/checkpoints/rm", {"checkpointUuids": []})) == 400
    assert _status(lambda: admin.request("DELETE", "/api/v1/checkpoints", {
        "checkpointUuids": ["00000000-0000-0000-0000-000000000000"]})) == 404

    admin.request("DELETE", "/api/v1/checkpoints", {"checkpointUuids": [c5]})
    assert admin.get(f"/api/v1/checkpoints/{c5}")["checkpoint"]["state"] == "STATE_DELETED"
    msg = _message(lambda: admin.post("/api/v1/models/refuses/versions", {"checkpointUuid": c5}))
    assert "DELETED" in msg
    assert admin.get("/api/v1/models/refuses")["model"]["numVersions"] == 0
    admin.request("DELETE", "/api/v1/models/refuses")


# -- who may do what ---------------------------------------------------------------------

def _make_user(admin: Client, name: str) -> int:
    try:
        body = admin.post("/api/v1/users", {"user": {"username": name, "active": True}, "password": PW})
    except ApiError as exc:
        if exc.status in (404, 405):
            pytest.skip("user creation route not built yet (POST /api/v1/users)")
        raise
    return int(body["user"]["id"])


def _assign(admin: Client, uid: int, role: str, ws: int) -> None:
    try:
        admin.post("/api/v1/roles/add-assignments", {"userRoleAssignments": [
            {"userId": uid, "roleAssignment": {"role": {"roleId": ROLE_IDS[role]}, "scopeWorkspaceId": ws}}]})
    except ApiError as exc:
        if exc.status in (404, 405):
            pytest.skip("role assignment route not built yet (POST /api/v1/roles/add-assignments)")
        raise


def _workspace(admin: Client, name: str) -> int:
    try:
        return int(admin.post("/api/v1/workspaces", {"name": name})["workspace"]["id"])
    except ApiError as exc:
        if exc.status in (404, 405):
            pytest.skip("workspace creation route not built yet (POST /api/v1/workspaces)")
        raise


@pytest.fixture(scope="module")
def team(registry: Registry) -> tuple[int, Client, Client]:
    """A workspace "team" with a model "secret"; a Viewer of team; an outsider (Editor on
    Uncategorized only, as every new user)."""
    admin, m = registry.admin, registry.master
    ws = _workspace(admin, "team")
    admin.post("/api/v1/models", {"name": "secret", "workspaceName": "team"})
    viewer = _make_user(admin, "viewer")
    _make_user(admin, "outsider")
    _assign(admin, viewer, "Viewer", ws)
    return ws, Client(m.url, m.login("viewer", PW)), Client(m.url, m.login("outsider", PW))


def test_a_viewer_lists_and_reads_but_cannot_create_or_register(registry: Registry,
                                                                team: tuple[int, Client, Client]) -> None:
    ws, viewer, _ = team
    assert "secret" in [m["name"] for m in viewer.get("/api/v1/models")["models"]]
    assert viewer.get("/api/v1/models/secret")["model"]["workspaceId"] == ws
    assert viewer.get("/api/v1/models/secret/versions")["modelVersions"] == []
    assert _status(lambda: viewer.post("/api/v1/models", {"name": "mine", "workspaceId": ws})) == 403
    uuid = registry.ckpts[-1]["uuid"]
    assert _status(lambda: viewer.post("/api/v1/models/secret/versions", {"checkpointUuid": uuid})) == 403
    assert _status(lambda: viewer.request("PATCH", "/api/v1/models/secret", {"notes": "x"})) == 403
    assert _status(lambda: viewer.request("DELETE", "/api/v1/models/secret")) == 403
    assert _status(lambda: viewer.post("/api/v1/models/secret/archive")) == 403


def test_an_outsider_cannot_see_the_model_at_all(team: tuple[int, Client, Client]) -> None:
    ws, _, outsider = team
    secret_id = next(m["id"] for m in team[1].get("/api/v1/models")["models"] if m["name"] == "secret")
    assert "secret" not in [m["name"] for m in outsider.get("/api/v1/models")["models"]]
    assert outsider.get(f"/api/v1/models?workspaceIds={ws}")["models"] == []
    for call in (lambda: outsider.get("/api/v1/models/secret"),
                 lambda: outsider.get(f"/api/v1/models/{secret_id}"),
                 lambda: outsider.get("/api/v1/models/secret/versions"),
                 lambda: outsider.request("DELETE", "/api/v1/models/secret"),
                 lambda: outsider.post("/api/v1/models", {"name": "sneak", "workspaceId": ws})):
        assert _status(call) == 404
    # An Editor of Uncategorized creates there, but cannot move into a workspace it cannot see.
    outsider.post("/api/v1/models", {"name": "outsiders"})
    assert _status(lambda: outsider.post("/api/v1/models/outsiders/move",
                                         {"destinationWorkspaceId": ws})) == 404
    assert outsider.get("/api/v1/models/outsiders")["model"]["workspaceId"] == 1


def test_move_between_workspaces(registry: Registry, team: tuple[int, Client, Client]) -> None:
    admin, (ws, viewer, outsider) = registry.admin, team
    admin.post("/api/v1/models", {"name": "mover"})
    assert outsider.get("/api/v1/models/mover")["model"]["workspaceId"] == 1
    admin.post("/api/v1/models/mover/move", {"destinationWorkspaceId": ws})
    assert admin.get("/api/v1/models/mover")["model"]["workspaceId"] == ws
    assert "mover" in [m["name"] for m in viewer.get(f"/api/v1/models?workspaceIds={ws}")["models"]]
    assert _status(lambda: outsider.get("/api/v1/models/mover")) == 404
    # The stock SDK's move_to_workspace: PATCH with workspaceName.
    admin.request("PATCH", "/api/v1/models/mover", {"workspaceName": "Uncategorized"})
    assert outsider.get("/api/v1/models/mover")["model"]["workspaceId"] == 1
    # A Viewer of team may not move a model out of it.
    admin.post("/api/v1/models/mover/move", {"destinationWorkspaceId": ws})
    assert _status(lambda: viewer.post("/api/v1/models/mover/move", {"destinationWorkspaceId": 1})) == 403
    assert _status(lambda: admin.post("/api/v1/models/mover/move", {"destinationWorkspaceId": 999})) == 404
    assert _status(lambda: admin.post("/api/v1/models/mover/move", {"destinationWorkspaceId": "x"})) == 400
    admin.request("DELETE", "/api/v1/models/mover")


# -- our CLI (last: it deletes the experiment's last checkpoint) -------------------------

DET = Path(sys.executable).parent / "det"


def test_det_model_cli(registry: Registry, tmp_path: Path) -> None:
    if not DET.exists():
        pytest.skip(f"{DET} is missing: run pip install -e . to install the det console script")
    env = {k: v for k, v in os.environ.items() if k not in ("DET_USER", "DET_PASS")}
    env.update(DET_MASTER=registry.master.url, DET_JUPYTER_CONFIG_DIR=str(tmp_path))
    done = subprocess.run([str(DET), "user", "login", "admin"], input=ADMIN_PASSWORD + "\n", env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr

    def det(*argv: str, ok: bool = True) -> subprocess.CompletedProcess:
        res = subprocess.run([str(DET), *argv], env=env, capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL)
        assert (res.returncode == 0) == ok, f"det {' '.join(argv)}: {res.returncode}\n{res.stdout}{res.stderr}"
        assert "Traceback" not in res.stderr
        return res

    uuid = registry.ckpts[-1]["uuid"]
    assert "Created model cli-model" in det("model", "create", "cli-model", "--description", "ours",
                                            "--label", "a").stdout
    listed = det("model", "list").stdout.splitlines()
    assert [h.strip() for h in listed[0].split("|")][:4] == ["ID", "Name", "Workspace ID", "Versions"]
    assert any(line.split("|")[1].strip() == "cli-model" for line in listed[2:])
    assert "as version 1 of model cli-model" in det("model", "register-version", "cli-model", uuid,
                                                     "--name", "v-one", "--comment", "first").stdout
    versions = det("model", "list-versions", "cli-model").stdout
    assert uuid in versions and "v-one" in versions and "first" in versions
    described = det("model", "describe", "cli-model").stdout
    assert "Versions:" in described and "ours" in described and uuid in described
    as_json = json.loads(det("model", "describe", "cli-model", "--json").stdout)
    assert as_json["numVersions"] == 1 and as_json["versions"][0]["checkpoint"]["uuid"] == uuid

    det("model", "archive", "cli-model")
    refused = det("model", "register-version", "cli-model", uuid, ok=False)
    assert "archived" in refused.stderr
    det("model", "unarchive", "cli-model")

    used = det("checkpoint", "delete", uuid, "--yes", ok=False)
    assert "model cli-model version 1" in used.stderr
    assert "--yes" in det("checkpoint", "delete", uuid, ok=False).stderr
    assert "Deleted model cli-model" in det("model", "delete", "cli-model").stdout
    det("checkpoint", "delete", uuid, "--yes")
    assert registry.admin.get(f"/api/v1/checkpoints/{uuid}")["checkpoint"]["state"] == "STATE_DELETED"
    assert "not found" in det("model", "describe", "cli-model", ok=False).stderr
