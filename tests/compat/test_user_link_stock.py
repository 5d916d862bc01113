"""The stock client (determined==0.38.1) and agent user links and tasks' user tokens:

* ``det user link-with-agent-user`` links a user (the stock ``det user list`` shows it); a
  non-admin cannot link anyone; a bad uid is refused with a message naming the field;
* ``determined.experimental.client`` inside a non-admin's trial (the task's interpreter has the
  stock package) works with no password — DET_USER + DET_USER_TOKEN — as the owner only.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests._master import ADMIN_PASSWORD, Client, MasterProcess, create_experiment, wait_experiment
from tests.integration._exp import trials

pytestmark = pytest.mark.compat
ADMIN = {"DET_USER": "admin", "DET_PASS": ADMIN_PASSWORD}
PASSWORD = "Str0ng-Passw0rd"
FIXTURE = Path(__file__).parent / "fixtures" / "stock_client"
TERMINAL = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("user-link") / "master").start()
    yield m
    m.stop()


def det(det_env: Any, m: MasterProcess, args: Sequence[str], env: dict[str, str],
        ok: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run([str(det_env.det_bin), *args], capture_output=True, text=True, timeout=120,
                         env=det_env.env(m.url, env), cwd=det_env.home, check=False,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    assert "Traceback" not in res.stderr, res.stderr
    if ok:
        assert res.returncode == 0, f"det {' '.join(args)}: exit {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res


def _create(admin: Client, name: str) -> dict:
    return admin.post("/api/v1/users", {"user": {"username": name, "admin": False, "active": True},
                                        "password": PASSWORD, "isHashed": False})["user"]


def _link_args(name: str, uid: str = "1500") -> list[str]:
    return ["user", "link-with-agent-user", name, "--agent-uid", uid, "--agent-gid", "1600",
            "--agent-user", "bobby", "--agent-group", "ml"]


def test_stock_det_user_link_with_agent_user(det_env: Any, cluster: MasterProcess) -> None:
    admin = cluster.admin()
    bob, carol = _create(admin, "bob"), _create(admin, "carol")
    det(det_env, cluster, _link_args("bob"), ADMIN)
    assert admin.get(f"/api/v1/users/{bob['id']}")["user"]["agentUserGroup"] == {
        "agentUid": 1500, "agentGid": 1600, "agentUser": "bobby", "agentGroup": "ml"}
    listed = det(det_env, cluster, ["user", "list"], ADMIN).stdout
    bob_line = next(ln for ln in listed.splitlines() if " bob " in f" {ln} ")
    assert all(v in bob_line for v in ("1500", "1600", "bobby", "ml")), listed

    as_carol = {"DET_USER": "carol", "DET_PASS": PASSWORD}
    for target in ("bob", "carol"):
        res = det(det_env, cluster, _link_args(target, "0"), as_carol, ok=False)
        assert res.returncode != 0
        assert "ADMINISTRATE_USER" in res.stdout + res.stderr
    assert admin.get(f"/api/v1/users/{bob['id']}")["user"]["agentUserGroup"]["agentUid"] == 1500
    assert "agentUserGroup" not in admin.get(f"/api/v1/users/{carol['id']}")["user"]

    res = det(det_env, cluster, _link_args("carol", "-5"), ADMIN, ok=False)
    assert res.returncode != 0 and "agentUid" in res.stdout + res.stderr
    assert "agentUserGroup" not in admin.get(f"/api/v1/users/{carol['id']}")["user"]


def test_stock_sdk_in_a_trial_acts_as_the_owner_without_a_password(
        det_env: Any, cluster: MasterProcess) -> None:
    admin = cluster.admin()
    eve = _create(admin, "eve")
    admin.request("PATCH", f"/api/v1/users/{eve['id']}", {"agentUserGroup": {"agentUid": 65534, "agentGid": 65534}})
    as_eve = Client(cluster.url, cluster.login("eve", PASSWORD))
    config = {
        "name": "stock-sdk", "entrypoint": "python3 stock_client.py", "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
        # The task's python3 is the one with determined installed (as in Determined's images).
        "environment": {"environment_variables": [f"PATH={det_env.python.parent}:/usr/bin:/bin"]},
    }
    exp_id = create_experiment(as_eve, yaml.safe_dump(config), FIXTURE)["experiment"]["id"]
    wait_experiment(as_eve, exp_id, TERMINAL, timeout=180)
    logs = as_eve.get(f"/api/v1/trials/{trials(as_eve, exp_id)[0]['id']}/logs")
    text = "".join(e["result"]["message"] for e in (logs if isinstance(logs, list) else [logs]) if "result" in e)
    line = next((ln for ln in text.splitlines() if ln.startswith("STOCK ")), None)
    assert line is not None, text[-4000:]
    report = json.loads(line[len("STOCK "):])
    assert report == {"experiment": exp_id, "whoami": "eve", "agent_uid": 65534, "same_user": True,
                      "create_user": "ForbiddenException"}, report
    assert "made-by-stock-sdk" not in {u["username"] for u in admin.get("/api/v1/users")["users"]}
