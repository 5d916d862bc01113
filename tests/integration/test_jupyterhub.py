"""Issue 30, end to end: a real JupyterHub 6 (DummyAuthenticator, configurable-http-proxy from
npm) whose spawner is ``det``, in front of a real det master that accepts the hub's tokens.

A hub user's server is a det notebook task owned by the det user of the same name: it queues
behind a full cluster (the hub's spawn progress shows the wait reason, and no timeout fires),
starts when the slot frees, answers through the hub's proxy at /user/<name>/, and is gone
when the hub stops it.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._hub import Hub, _chp, hub_cluster
from tests._master import ApiError, Client, MasterProcess, wait_experiment, wait_for
from tests.integration._exp import submit_counter, trials

pytestmark = pytest.mark.slow
pytest.importorskip("jupyterhub", reason="the JupyterHub tests need jupyterhub (pip install -e '.[test]')")

@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[MasterProcess, Hub]]:
    """A one-slot master serving a hub's users, and the hub (``hub_extra`` marks add config)."""
    marker = request.node.get_closest_marker("hub_extra")
    with hub_cluster(tmp_path, marker.args[0] if marker else "") as both:
        yield both


def _progress(hub: Hub, user: str, want: str, timeout: float = 60) -> list[str]:
    """The hub's spawn progress messages (its event stream) until one contains ``want``."""
    req = urllib.request.Request(f"{hub.api_url}/users/{user}/server/progress",
                                 headers={"Authorization": f"token {hub.admin_token}"})
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("data:"):
                seen.append(json.loads(line[5:]).get("message", ""))
                if want in seen[-1]:
                    return seen
            if time.monotonic() > deadline:
                break
    raise AssertionError(f"no progress message with {want!r}: {seen}")


def test_a_hub_users_server_queues_then_runs_as_their_det_notebook(
        cluster: tuple[MasterProcess, Hub]) -> None:
    master, hub = cluster
    admin = master.admin()
    blocker = submit_counter(admin, length=10_000, sleep=0.05)  # the cluster's one slot
    wait_for(lambda: (ts := trials(admin, blocker)) and ts[0]["state"] == "STATE_RUNNING",
             what="the cluster full")

    hub.api("POST", "/users/alice")
    hub.api("POST", "/users/alice/server")
    seen = _progress(hub, "alice", "Queued on the det cluster")
    assert any("waiting for 1 free slots" in m or "behind job" in m for m in seen), seen
    # It waits, and keeps waiting past what would have been a spawn timeout of seconds.
    time.sleep(3)
    assert hub.server("alice").get("pending") == "spawn", hub.server("alice")

    # The det side: a notebook of the det user alice, made on first use.
    (nb,) = admin.get("/api/v1/notebooks")["notebooks"]
    assert nb["username"] == "alice" and nb["state"] == "STATE_QUEUED", nb

    admin.post(f"/api/v1/experiments/{blocker}/kill")
    wait_experiment(admin, blocker, {"STATE_CANCELED", "STATE_COMPLETED", "STATE_ERROR"}, timeout=60)
    wait_for(lambda: hub.server("alice").get("ready"), timeout=120, what="alice's server ready")

    # Reached through the hub's proxy with alice's own hub token.
    token = hub.api("POST", "/users/alice/tokens", {"note": "test"})["token"]  # type: ignore[index]
    req = urllib.request.Request(f"{hub.url}/user/alice/api/status", headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 200 and "started" in json.loads(resp.read())
    # Another user's token gets nowhere there.
    hub.api("POST", "/users/bob")
    bobs = hub.api("POST", "/users/bob/tokens", {"note": "test"})["token"]  # type: ignore[index]
    req = urllib.request.Request(f"{hub.url}/user/alice/api/status", headers={"Authorization": f"token {bobs}"})
    with pytest.raises(urllib.error.HTTPError) as denied:
        urllib.request.urlopen(req, timeout=30)
    assert denied.value.code in (403, 404)

    # The hub restarts (its servers left running): alice's server is found again, no respawn.
    hub.stop()
    hub.start(_chp() or "")
    wait_for(lambda: hub.server("alice").get("ready"), timeout=60, what="alice's server found again")
    with urllib.request.urlopen(urllib.request.Request(
            f"{hub.url}/user/alice/api/status", headers={"Authorization": f"token {token}"}), timeout=30) as resp:
        assert resp.status == 200
    assert [n["id"] for n in admin.get("/api/v1/notebooks")["notebooks"]] == [nb["id"]]

    # Hub tokens are det credentials: a hub admin is a det admin, a hub user is not.
    boss = hub.api("POST", "/users/boss/tokens", {"note": "test"})["token"]  # type: ignore[index]
    assert Client(master.url, boss).get("/api/v1/me")["user"]["admin"] is True
    assert Client(master.url, bobs).get("/api/v1/me")["user"]["username"] == "bob"
    assert Client(master.url, bobs).get("/api/v1/me")["user"]["admin"] is False
    with pytest.raises(ApiError) as refused:
        Client(master.url, "not-a-token").get("/api/v1/me")
    assert refused.value.status == 401

    # Stopping in the hub ends the det task.
    hub.api("DELETE", "/users/alice/server")
    wait_for(lambda: admin.get(f"/api/v1/notebooks/{nb['id']}")["notebook"]["state"] == "STATE_TERMINATED",
             timeout=60, what="the det task ended")
    assert "Traceback" not in master.log()



@pytest.mark.hub_extra("c.DetSpawner.notebook_config = {'idle_timeout': '6s'}\nc.Spawner.poll_interval = 2\n")
def test_an_idle_hub_server_is_culled_by_det_and_the_hub_sees_it_stopped(
        cluster: tuple[MasterProcess, Hub]) -> None:
    """det's culler looks at the server's kernels as the master's hub service (its role grants
    access:servers): with no kernel busy it ends the task after its idle_timeout, and the
    hub's next poll reports the server stopped."""
    master, hub = cluster
    admin = master.admin()
    hub.api("POST", "/users/carol")
    hub.api("POST", "/users/carol/server")
    wait_for(lambda: hub.server("carol").get("ready"), timeout=120, what="carol's server ready")
    (nb,) = admin.get("/api/v1/notebooks")["notebooks"]
    wait_for(lambda: admin.get(f"/api/v1/notebooks/{nb['id']}")["notebook"]["state"] == "STATE_TERMINATED",
             timeout=60, what="the idle server culled")
    ended = admin.get(f"/api/v1/notebooks/{nb['id']}")["notebook"]
    assert "culled: idle" in ended["exitStatus"], ended
    wait_for(lambda: not hub.server("carol"), timeout=30, what="the hub seeing it stopped")
