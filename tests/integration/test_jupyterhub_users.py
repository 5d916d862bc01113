"""Issue 30: the hub's users in det, with a real JupyterHub 6 (DummyAuthenticator,
configurable-http-proxy) in front of a real master (tests/_hub.py).

- A hub admin is a det ClusterAdmin and stops being one when the hub takes admin away; hub
  groups are det groups whose members the hub sets, so a role given to the group reaches them.
- Named servers ``a-b``/``c`` and ``a``/``b-c`` are two servers of two users (the hub's own
  OAuth client names would be the same; DetSpawner's are not).
- The hub's token for one user's server is not readable by another user's task: not in its
  environment, not in /proc, not through the REST API with its own token.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from det_jupyter.services.access.authz import ROLE_IDS
from tests._hub import Hub, hub_cluster
from tests._master import ApiError, Client, MasterProcess, wait_for
from tests.integration._exp import task_log_text

pytestmark = pytest.mark.slow
pytest.importorskip("jupyterhub", reason="the JupyterHub tests need jupyterhub (pip install -e '.[test]')")

ZERO_SLOTS = "c.DetSpawner.slots = 0\n"


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[MasterProcess, Hub]]:
    marker = request.node.get_closest_marker("hub_extra")
    with hub_cluster(tmp_path, ZERO_SLOTS + (marker.args[0] if marker else "")) as both:
        yield both


def _token(hub: Hub, user: str) -> str:
    """A new API token of ``user`` (a new token: the master has not cached what the hub said)."""
    made = hub.api("POST", f"/users/{user}/tokens", {"note": "test"})
    assert isinstance(made, dict)
    return str(made["token"])


def _det_groups(admin: Client, user_id: int) -> set[str]:
    found = admin.post("/api/v1/groups/search", {"userId": user_id, "limit": 100})["groups"]
    return {g["group"]["name"] for g in found}


def test_hub_admins_and_groups_follow_the_hub(cluster: tuple[MasterProcess, Hub]) -> None:
    master, hub = cluster
    admin = master.admin()
    hub.api("POST", "/users/dora")
    hub.api("POST", "/groups/team", {"users": ["dora"]})
    dora = Client(master.url, _token(hub, "dora"))
    me = dora.get("/api/v1/me")["user"]
    assert me["username"] == "dora" and me["admin"] is False
    assert _det_groups(admin, me["id"]) == {"team"}

    # A role given to the det group reaches the hub group's members: a workspace only the
    # team sees, with an experiment in it.
    ws = admin.post("/api/v1/workspaces", {"name": "team-space"})["workspace"]["id"]
    (team,) = [g["group"]["groupId"] for g in admin.post("/api/v1/groups/search", {"name": "team"})["groups"]]
    admin.post("/api/v1/roles/add-assignments", {"groupRoleAssignments": [
        {"groupId": team, "roleAssignment": {"role": {"roleId": ROLE_IDS["Viewer"]}, "scopeWorkspaceId": ws}}]})
    assert ws in [w["id"] for w in dora.get("/api/v1/workspaces")["workspaces"]]
    hub.api("POST", "/users/eve")
    eve = Client(master.url, _token(hub, "eve"))
    assert ws not in [w["id"] for w in eve.get("/api/v1/workspaces")["workspaces"]]

    # The hub takes dora out of the team: her next new token sees the workspace no more.
    hub.api("DELETE", "/groups/team/users", {"users": ["dora"]})
    dora = Client(master.url, _token(hub, "dora"))
    assert ws not in [w["id"] for w in dora.get("/api/v1/workspaces")["workspaces"]]
    assert _det_groups(admin, me["id"]) == set()

    # Made admin in the hub after her first sign-in: a det admin; taken back: not.
    hub.api("PATCH", "/users/dora", {"admin": True})
    assert Client(master.url, _token(hub, "dora")).get("/api/v1/me")["user"]["admin"] is True
    hub.api("PATCH", "/users/dora", {"admin": False})
    demoted = Client(master.url, _token(hub, "dora"))
    assert demoted.get("/api/v1/me")["user"]["admin"] is False
    with pytest.raises(ApiError) as refused:
        demoted.get("/api/v1/master/config")
    assert refused.value.status == 403
    # A det admin who is a hub user, not a hub admin, stays a det admin: det gave it.
    hub.api("POST", "/users/admin")
    assert Client(master.url, _token(hub, "admin")).get("/api/v1/me")["user"]["admin"] is True


def _status(hub: Hub, path: str, token: str) -> int:
    req = urllib.request.Request(f"{hub.url}{path}", headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


@pytest.mark.hub_extra("c.JupyterHub.allow_named_servers = True\n")
def test_named_servers_a_b_c_and_a_b_c_stay_distinct(cluster: tuple[MasterProcess, Hub]) -> None:
    master, hub = cluster
    admin = master.admin()
    for user, server in (("a-b", "c"), ("a", "b-c")):
        hub.api("POST", f"/users/{user}")
        hub.api("POST", f"/users/{user}/servers/{server}")
    for user, server in (("a-b", "c"), ("a", "b-c")):
        wait_for(lambda u=user, s=server: (hub.api("GET", f"/users/{u}")["servers"]  # type: ignore[index]
                                           .get(s, {}).get("ready")),
                 timeout=120, what=f"{user}/{server} ready")
    ab, a = _token(hub, "a-b"), _token(hub, "a")
    assert _status(hub, "/user/a-b/c/api/status", ab) == 200
    assert _status(hub, "/user/a/b-c/api/status", a) == 200
    assert _status(hub, "/user/a-b/c/api/status", a) in (403, 404)
    assert _status(hub, "/user/a/b-c/api/status", ab) in (403, 404)
    owners = sorted(n["username"] for n in admin.get("/api/v1/notebooks")["notebooks"])
    assert owners == ["a", "a-b"], owners
    # Stopping one leaves the other running.
    hub.api("DELETE", "/users/a/servers/b-c")
    wait_for(lambda: "b-c" not in hub.api("GET", "/users/a")["servers"], timeout=60,  # type: ignore[index]
             what="a/b-c stopped")
    assert _status(hub, "/user/a-b/c/api/status", ab) == 200


#: Run by bob's task: everything it can read that might hold another user's secret.
SNOOP = r"""
import glob, json, os, urllib.request
out = [json.dumps(dict(os.environ))]
for p in glob.glob('/proc/[0-9]*/environ') + glob.glob('/proc/[0-9]*/cmdline'):
    try:
        out.append(open(p, 'rb').read().decode(errors='replace'))
    except OSError as e:
        out.append(f'{p}: {e.strerror}')
m, t = os.environ['DET_MASTER'], os.environ['DET_USER_TOKEN']
for path in ['/api/v1/notebooks', '/api/v1/notebooks/NB', '/api/v1/tasks/NB', '/api/v1/tasks/NB/config',
             '/api/v1/tasks/NB/logs', '/api/v1/hub/servers/NB', '/api/v1/tasks', '/api/v1/commands']:
    try:
        req = urllib.request.Request(m + path, headers={'Authorization': 'Bearer ' + t})
        out.append(path + ' ' + urllib.request.urlopen(req, timeout=10).read().decode())
    except Exception as e:
        out.append(path + ' ' + str(e))
print('SNOOPED ' + '\n'.join(out))
"""


def _hub_token_of(user: str) -> str:
    """The hub token in the environment of ``user``'s running server (read as root, here)."""
    for path in Path("/proc").glob("[0-9]*/environ"):
        try:
            env = dict(v.split("=", 1) for v in path.read_bytes().decode(errors="replace").split("\0") if "=" in v)
        except OSError:
            continue
        if env.get("JUPYTERHUB_USER") == user and env.get("JUPYTERHUB_API_TOKEN"):
            return env["JUPYTERHUB_API_TOKEN"]
    raise AssertionError(f"no running server of {user} found")


def test_a_users_hub_token_is_not_readable_by_another_users_task(cluster: tuple[MasterProcess, Hub]) -> None:
    master, hub = cluster
    admin = master.admin()
    hub.api("POST", "/users/alice")
    hub.api("POST", "/users/alice/server")
    wait_for(lambda: hub.server("alice").get("ready"), timeout=120, what="alice's server ready")
    secret = _hub_token_of("alice")
    (nb,) = admin.get("/api/v1/notebooks")["notebooks"]

    # bob's own task (launched with his hub token) looks everywhere it can.
    hub.api("POST", "/users/bob")
    bob = Client(master.url, _token(hub, "bob"))
    cmd = bob.post("/api/v1/commands", {"config": {
        "entrypoint": [sys.executable, "-c", SNOOP.replace("NB", nb["id"])]}})["command"]
    wait_for(lambda: bob.get(f"/api/v1/commands/{cmd['id']}")["command"]["state"] == "STATE_TERMINATED",
             timeout=120, what="bob's task's end")
    seen = task_log_text(bob, cmd["id"])
    assert "SNOOPED" in seen, seen[-2000:]
    assert "DET_USER_TOKEN" in seen, "the task did not even read its own environment"
    assert secret not in seen, "alice's hub token reached bob's task"
    # Nor does the master show it to anyone over REST, even an admin.
    for path in (f"/api/v1/notebooks/{nb['id']}", f"/api/v1/tasks/{nb['id']}", f"/api/v1/hub/servers/{nb['id']}",
                 "/api/v1/notebooks", "/api/v1/tasks"):
        assert secret not in json.dumps(admin.get(path)), path
    assert secret not in task_log_text(admin, nb["id"])


def test_the_master_as_a_hub_managed_service(tmp_path: Path) -> None:
    """The hub starts the master itself (a managed service): JUPYTERHUB_API_URL and
    JUPYTERHUB_API_TOKEN come from the hub, and hub tokens are det credentials at once."""
    from tests._hub import _chp
    from tests._master import free_port

    chp = _chp()
    if chp is None:
        pytest.skip("configurable-http-proxy is not installed (scripts/test.sh installs it)")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    hub = Hub(tmp_path / "hub", url, "unused")
    hub.work.mkdir()
    argv = [sys.executable, "-m", "det_jupyter.cli.up", "up", "--port", str(port),
            "--data-dir", str(tmp_path / "master"), "--no-agent"]
    hub.extra = (ZERO_SLOTS + "c.JupyterHub.services = [\n"
                 f"    {{'name': 'det-master', 'command': {argv!r}, 'url': {url!r},\n"
                 f"      'environment': {{'HOME': {str(tmp_path)!r}}}, 'oauth_no_confirm': True,\n"
                 f"      'oauth_redirect_uri': {url + '/det-jupyter/hub/oauth_callback'!r}}},\n"
                 f"    {{'name': 'tester', 'api_token': {hub.admin_token!r}}},\n]\n")
    try:
        hub.start(chp)
        wait_for(lambda: _answers(url), timeout=90, what="the hub-managed master answering")
        hub.api("POST", "/users/fay")
        fay = Client(url, _token(hub, "fay"))
        assert fay.get("/api/v1/me")["user"]["username"] == "fay"
        assert Client(url, _token(hub, "boss")).get("/api/v1/me")["user"]["admin"] is True
    finally:
        hub.stop()
        _stop_processes_of(tmp_path / "master")  # the hub leaves its managed services running
    assert "Traceback" not in hub.log(), hub.log()[-3000:]


def _stop_processes_of(data_dir: Path) -> None:
    import os
    import signal
    import time

    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(data_dir) in cmdline.read_bytes().decode(errors="replace"):
                os.kill(int(cmdline.parent.name), signal.SIGTERM)
        except (OSError, ValueError):
            continue
    time.sleep(1)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/api/v1/master", timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False
