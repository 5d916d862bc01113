"""Roles from the command line: the stock CLI's ``det rbac …`` (determined==0.38.1) and ours
give and take back roles on det-jupyter, and what they change is enforced on the next request."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests._master import ADMIN_PASSWORD, ApiError, Client, MasterProcess
from tests.compat.test_users_cli import det

pytestmark = pytest.mark.compat
PASSWORD = "Str0ng-Passw0rd"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("rbac-cli") / "master", extra_args=["--no-agent"]).start()
    yield m
    m.stop()


def _setup(admin: Client, user: str) -> tuple[int, int]:
    uid = admin.post("/api/v1/users", {"user": {"username": user, "active": True}, "password": PASSWORD})["user"]["id"]
    ws = admin.post("/api/v1/workspaces", {"name": f"team-{user}"})["workspace"]["id"]
    return uid, ws


def test_stock_det_rbac(det_env: Any, cluster: MasterProcess) -> None:
    admin = cluster.admin()
    uid, ws = _setup(admin, "carol")
    carol = Client(cluster.url, cluster.login("carol", PASSWORD))
    with pytest.raises(ApiError) as err:
        carol.get(f"/api/v1/workspaces/{ws}")
    assert err.value.status == 404

    roles = json.loads(det(det_env, cluster, ["rbac", "list-roles", "--json"]).stdout)
    assert {"Viewer", "Editor", "WorkspaceAdmin", "ClusterAdmin"} <= {r["name"] for r in roles["roles"]}
    det(det_env, cluster, ["rbac", "assign-role", "Viewer", "--username-to-assign", "carol",
                           "--workspace-name", "team-carol"])
    assert carol.get(f"/api/v1/workspaces/{ws}")["workspace"]["name"] == "team-carol"
    listed = det(det_env, cluster, ["rbac", "list-users-roles", "carol"]).stdout
    assert "Viewer" in listed and "team-carol" in listed
    described = det(det_env, cluster, ["rbac", "describe-role", "Viewer"]).stdout
    assert "VIEW_WORKSPACE" in described.upper()
    mine = det(det_env, cluster, ["rbac", "my-permissions"],
               env={"DET_USER": "carol", "DET_PASS": PASSWORD}).stdout
    assert "team-carol" in mine

    # A Viewer may not give roles, not even to itself (403, nothing changes).
    res = det(det_env, cluster, ["rbac", "assign-role", "WorkspaceAdmin", "--username-to-assign", "carol",
                                 "--workspace-name", "team-carol"],
              env={"DET_USER": "carol", "DET_PASS": PASSWORD}, ok=False)
    assert res.returncode != 0
    det(det_env, cluster, ["rbac", "unassign-role", "Viewer", "--username-to-assign", "carol",
                           "--workspace-name", "team-carol"])
    with pytest.raises(ApiError) as err:
        carol.get(f"/api/v1/workspaces/{ws}")
    assert err.value.status == 404


def _ours(cluster: MasterProcess, *args: str, user: str = "admin", password: str = ADMIN_PASSWORD,
          ok: bool = True) -> subprocess.CompletedProcess[str]:
    env = {"DET_MASTER": cluster.url, "DET_USER": user, "DET_PASS": password, "HOME": str(cluster.data_dir)}
    res = subprocess.run([sys.executable, "-m", "det_jupyter.cli.det", *args], capture_output=True, text=True,
                         timeout=60, env=env, check=False)
    assert "Traceback" not in res.stderr, res.stderr
    if ok:
        assert res.returncode == 0, res.stderr
    return res


def test_our_det_rbac(cluster: MasterProcess) -> None:
    admin = cluster.admin()
    uid, ws = _setup(admin, "dave")
    dave = Client(cluster.url, cluster.login("dave", PASSWORD))
    assert "Editor" in _ours(cluster, "rbac", "list-roles").stdout
    out = _ours(cluster, "rbac", "assign-role", "Editor", "-u", "dave", "-w", "team-dave").stdout
    assert "Assigned role Editor to user dave on workspace team-dave" in out
    assert dave.get(f"/api/v1/workspaces/{ws}")["workspace"]["id"] == ws
    assert "team-dave" in _ours(cluster, "rbac", "list-users-roles", "dave").stdout
    assert "team-dave" in _ours(cluster, "rbac", "my-permissions", user="dave", password=PASSWORD).stdout
    bad = _ours(cluster, "rbac", "assign-role", "Owner", "-u", "dave", ok=False)
    assert bad.returncode == 1 and "no role named 'Owner'" in bad.stderr
    denied = _ours(cluster, "rbac", "assign-role", "ClusterAdmin", "-u", "dave", user="dave",
                   password=PASSWORD, ok=False)
    assert denied.returncode == 1 and "ClusterAdmin" in denied.stderr
    _ours(cluster, "rbac", "unassign-role", "Editor", "-u", "dave", "-w", "team-dave")
    with pytest.raises(ApiError):
        dave.get(f"/api/v1/workspaces/{ws}")
    assert uid
