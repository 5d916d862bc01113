"""The stock ``det workspace``, ``det project`` and ``det e move|archive|unarchive|delete``
against det-jupyter: each exits 0, prints what 0.38.1 prints, and the master's state changes
as asked (checked over REST)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests._master import ADMIN_PASSWORD, MasterProcess, create_experiment, wait_experiment
from tests.integration._exp import COUNTER, counter_config

pytestmark = pytest.mark.compat
ADMIN = {"user": "admin", "password": ADMIN_PASSWORD}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("ws-cli") / "master").start()
    yield m
    m.stop()


def _ok(res: Any) -> str:
    assert res.returncode == 0, f"exit {res.returncode}\nstdout: {res.stdout}\nstderr: {res.stderr}"
    assert "Traceback" not in res.stderr
    return res.stdout


def _rows(stdout: str) -> list[list[str]]:
    lines = [ln for ln in stdout.splitlines() if "|" in ln]
    return [[c.strip() for c in ln.split("|")] for ln in lines][1:]


def test_stock_workspace_and_project_commands(det_env, cluster: MasterProcess) -> None:
    c = cluster.admin()

    def det(*argv: str) -> str:
        return _ok(det_env.det(list(argv), cluster.url, **ADMIN))

    created = json.loads(det("workspace", "create", "cli-ws", "--json"))
    det_env.check_shape("v1Workspace", created)
    wid = created["id"]
    assert ["cli-ws"] == [r[1] for r in _rows(det("workspace", "list")) if r[0] == str(wid)]
    listed = c.get("/api/v1/workspaces")
    det_env.check_shape("v1GetWorkspacesResponse", listed)
    assert json.loads(det("workspace", "describe", "cli-ws", "--json"))["name"] == "cli-ws"

    out = det("project", "create", "cli-ws", "cli-proj", "--description", "made by det")
    row = next(r for r in _rows(out) if r[2] == "cli-proj")
    assert row[3] == "made by det"
    projects = c.get(f"/api/v1/workspaces/{wid}/projects")
    det_env.check_shape("v1GetWorkspaceProjectsResponse", projects)
    pid = projects["projects"][0]["id"]
    det_env.check_shape("v1GetProjectResponse", c.get(f"/api/v1/projects/{pid}"))
    assert [r[2] for r in _rows(det("workspace", "list-projects", "cli-ws"))] == ["cli-proj"]
    assert [r[2] for r in _rows(det("project", "list", "cli-ws"))] == ["cli-proj"]
    described = json.loads(det("project", "describe", "cli-ws", "cli-proj", "--json"))
    assert (described["id"], described["workspaceId"]) == (pid, wid)
    det("project", "edit", "cli-ws", "cli-proj", "--description", "edited")
    assert c.get(f"/api/v1/projects/{pid}")["project"]["description"] == "edited"

    # det e move into the project, then list-experiments shows it there.
    cfg = yaml.safe_load(counter_config(length=2, sleep=0.01))
    eid = create_experiment(c, yaml.safe_dump(cfg), COUNTER)["experiment"]["id"]
    assert wait_experiment(c, eid, {"STATE_COMPLETED", "STATE_ERROR"}) == "STATE_COMPLETED"
    assert f'Moved experiment {eid} to project "cli-proj"' in det("e", "move", str(eid), "cli-ws", "cli-proj")
    assert c.get(f"/api/v1/experiments/{eid}")["experiment"]["projectId"] == pid
    assert [r[0] for r in _rows(det("project", "list-experiments", "cli-ws", "cli-proj"))] == [str(eid)]
    assert f"Archived experiment {eid}" in det("e", "archive", str(eid))
    assert c.get(f"/api/v1/experiments/{eid}")["experiment"]["archived"] is True
    assert _rows(det("project", "list-experiments", "cli-ws", "cli-proj")) == []
    assert str(eid) in [r[0] for r in _rows(det("project", "list-experiments", "cli-ws", "cli-proj", "--all"))]
    det("e", "unarchive", str(eid))
    assert c.get(f"/api/v1/experiments/{eid}")["experiment"]["archived"] is False

    # Archive and unarchive: the project, then the workspace.
    assert "Successfully archived project cli-proj" in det("project", "archive", "cli-ws", "cli-proj")
    assert c.get(f"/api/v1/projects/{pid}")["project"]["archived"] is True
    det("project", "unarchive", "cli-ws", "cli-proj")
    assert "Successfully archived workspace cli-ws" in det("workspace", "archive", "cli-ws")
    assert c.get(f"/api/v1/workspaces/{wid}")["workspace"]["archived"] is True
    refused = det_env.det(["project", "create", "cli-ws", "later"], cluster.url, **ADMIN)
    assert refused.returncode != 0 and "archived" in refused.stdout + refused.stderr
    det("workspace", "unarchive", "cli-ws")

    # The built-in Uncategorized refuses, with the reason.
    res = det_env.det(["workspace", "archive", "Uncategorized"], cluster.url, **ADMIN)
    assert res.returncode != 0 and "built in" in res.stdout + res.stderr

    # Deleting the project deletes its experiment; then the workspace goes.
    assert "Successfully deleted project cli-proj" in det("project", "delete", "cli-ws", "cli-proj", "--yes")
    assert c.get(f"/api/v1/experiments?projectId={pid}")["experiments"] == []
    det("workspace", "edit", "cli-ws", "--name", "cli-ws-2")
    assert c.get(f"/api/v1/workspaces/{wid}")["workspace"]["name"] == "cli-ws-2"
    assert "Successfully deleted workspace cli-ws-2" in det("workspace", "delete", "cli-ws-2", "--yes")
    assert wid not in [w["id"] for w in c.get("/api/v1/workspaces")["workspaces"]]


def test_stock_experiment_delete(det_env, cluster: MasterProcess) -> None:
    c = cluster.admin()
    exp = create_experiment(c, counter_config(), COUNTER, activate=False)["experiment"]
    res = det_env.det(["e", "delete", str(exp["id"]), "--yes"], cluster.url, **ADMIN)
    assert res.returncode != 0 and "kill" in res.stdout + res.stderr  # not ended yet
    c.post(f"/api/v1/experiments/{exp['id']}/kill")
    wait_experiment(c, exp["id"], {"STATE_CANCELED"})
    assert f"Deletion of experiment {exp['id']} is in progress" in _ok(
        det_env.det(["e", "delete", str(exp["id"]), "--yes"], cluster.url, **ADMIN))
    assert exp["id"] not in [e["id"] for e in c.get("/api/v1/experiments")["experiments"]]
