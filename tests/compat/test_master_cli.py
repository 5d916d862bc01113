"""The stock CLI's ``det master`` commands against our master: ``config show`` (no secrets),
``logs --tail``, ``cluster-message set|get|clear`` (and the message in ``GET /api/v1/master``
while it is active); a non-admin is refused every one of them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests._master import ADMIN_PASSWORD, ApiError, Client, MasterProcess

pytestmark = pytest.mark.compat
ADMIN = {"user": "admin", "password": ADMIN_PASSWORD}
PW = "Pw-for-bob-1"


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("master-cli") / "master", slots=1).start()
    yield m
    m.stop()


def _ok(res: Any) -> str:
    assert res.returncode == 0, f"exit {res.returncode}\nstdout: {res.stdout}\nstderr: {res.stderr}"
    return res.stdout


def test_det_master_config_show_hides_the_secrets(det_env, master: MasterProcess) -> None:
    shown = json.loads(_ok(det_env.det(["master", "config", "show", "--json"], master.url, **ADMIN)))
    assert "data_dir" not in shown and str(master.data_dir) not in json.dumps(shown)  # no response names it
    assert [p["pool_name"] for p in shown["resources"]["resource_pools"]] == ["default"]
    token = (master.data_dir / "agent_token").read_text().strip()
    text = json.dumps(shown)
    assert "agent_token" not in shown and token not in text and ADMIN_PASSWORD not in text
    det_env.check_shape("v1GetMasterConfigResponse", master.admin().get("/api/v1/master/config"))


def test_det_master_logs_tails_the_masters_own_log(det_env, master: MasterProcess) -> None:
    out = _ok(det_env.det(["master", "logs", "--tail", "3"], master.url, **ADMIN))
    lines = out.splitlines()
    assert 1 <= len(lines) <= 3, out
    assert all("]: " in line for line in lines), out
    first = master.admin().get("/api/v1/master/logs?limit=1")  # one ndjson line: one object
    det_env.check_shape("v1MasterLogsResponse", first["result"])
    everything = master.admin().get("/api/v1/master/logs")
    messages = [e["result"]["logEntry"]["message"] for e in everything]
    assert any("det-jupyter master at" in m for m in messages), messages[-10:]
    # Jupyter prints its URL with ?token=: the log keeps it redacted, as master.log does.
    assert all(m.split("token=", 1)[1].startswith("[redacted]") for m in messages if "token=" in m)


def test_det_master_cluster_message_set_get_and_clear(det_env, master: MasterProcess) -> None:
    admin = master.admin()
    _ok(det_env.det(["master", "cluster-message", "set", "-m", "maintenance at five", "--duration", "1h"],
                    master.url, **ADMIN))
    got = json.loads(_ok(det_env.det(["master", "cluster-message", "get", "--json"], master.url, **ADMIN)))
    assert got["clusterMessage"]["message"] == "maintenance at five" and got["clusterMessage"]["endTime"]
    info = Client(master.url).get("/api/v1/master")  # public: everyone sees an active message
    assert info["clusterMessage"]["message"] == "maintenance at five"
    det_env.check_shape("v1GetMasterResponse", info)

    too_long = det_env.det(["master", "cluster-message", "set", "-m", "x" * 251], master.url, **ADMIN)
    assert too_long.returncode != 0 and "at most 250 characters" in too_long.stdout + too_long.stderr
    assert admin.get("/api/v1/master/cluster_message")["clusterMessage"]["message"] == "maintenance at five"

    _ok(det_env.det(["master", "cluster-message", "clear"], master.url, **ADMIN))
    assert admin.get("/api/v1/master/cluster_message") == {}
    assert "clusterMessage" not in Client(master.url).get("/api/v1/master")


def test_a_non_admin_is_refused_the_masters_config_logs_and_message(master: MasterProcess) -> None:
    admin = master.admin()
    admin.post("/api/v1/users", {"user": {"username": "bob", "active": True, "admin": False}, "password": PW})
    bob = Client(master.url, master.login("bob", PW))
    for method, path, body in [("GET", "/api/v1/master/config", None), ("GET", "/api/v1/master/logs", None),
                               ("GET", "/api/v1/master/cluster_message", None),
                               ("PUT", "/api/v1/master/cluster_message", {"message": "mine now"}),
                               ("DELETE", "/api/v1/master/cluster_message", None)]:
        with pytest.raises(ApiError) as err:
            bob.request(method, path, body)
        assert err.value.status == 403, (method, path, err.value.body)
    assert admin.get("/api/v1/master/cluster_message") == {}

