"""Agent user links and tasks' user tokens against a real master with its embedded agent.

* ``PATCH /api/v1/users/{id}`` with ``agentUserGroup`` (what the stock ``det user
  link-with-agent-user`` sends) links a user; only an admin may, for anyone; bad values get 400
  naming the field; the link is shown in every v1User and survives a master restart.
* A linked owner's tasks (a trial, a command) get ``run_as`` in their spec: an agent running as
  root runs them as that uid/gid.
* Inside a non-admin's trial, ``DET_USER`` is the owner and ``DET_USER_TOKEN`` acts as the
  owner (``/api/v1/me``), is refused on admin-only routes, and is refused once the allocation
  ended — and after a master restart for an allocation the old master left running.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests._master import (
    ADMIN_PASSWORD,
    ApiError,
    Client,
    MasterProcess,
    context_files,
    create_experiment,
    wait_experiment,
    wait_for,
)
from tests.integration._exp import trials

WHOAMI = Path(__file__).parent / "fixtures" / "whoami"
PASSWORD = "Str0ng-Passw0rd"
TERMINAL = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}
LINK = {"agentUid": 1500, "agentGid": 1600, "agentUser": "bobby", "agentGroup": "ml"}


def trial_log_text(client: Client, trial_id: int) -> str:
    """The trial's log so far ("" before its first line)."""
    lines = client.get(f"/api/v1/trials/{trial_id}/logs")
    if isinstance(lines, dict):
        lines = [lines]
    return "".join(entry["result"]["message"] for entry in lines if "result" in entry)


def _status(call) -> int:  # noqa: ANN001
    with pytest.raises(ApiError) as err:
        call()
    return err.value.status


def _error(call) -> tuple[int, str]:  # noqa: ANN001
    with pytest.raises(ApiError) as err:
        call()
    body = err.value.body
    return err.value.status, body.get("message", "") if isinstance(body, dict) else str(body)


def _create(admin: Client, name: str) -> dict:
    return admin.post("/api/v1/users", {"user": {"username": name, "admin": False, "active": True},
                                        "password": PASSWORD, "isHashed": False})["user"]


def _as(m: MasterProcess, name: str) -> Client:
    return Client(m.url, m.login(name, PASSWORD))


def _link(client: Client, user_id: int, link: dict) -> dict:
    return client.request("PATCH", f"/api/v1/users/{user_id}", {"agentUserGroup": link})["user"]


def test_only_an_admin_links_users_and_every_v1user_shows_it(any_master: MasterProcess) -> None:
    admin = any_master.admin()
    bob, carol = _create(admin, "bob"), _create(admin, "carol")
    assert "agentUserGroup" not in bob
    as_bob = _as(any_master, "bob")

    # A non-admin may link no one, not even themself; nothing changes.
    assert _status(lambda: _link(as_bob, bob["id"], LINK)) == 403
    assert _status(lambda: _link(as_bob, carol["id"], LINK)) == 403
    assert "agentUserGroup" not in admin.get(f"/api/v1/users/{bob['id']}")["user"]

    linked = _link(admin, bob["id"], LINK)
    assert linked["agentUserGroup"] == LINK
    assert admin.get(f"/api/v1/users/{bob['id']}")["user"]["agentUserGroup"] == LINK
    assert admin.get("/api/v1/users/bob/by-username")["user"]["agentUserGroup"] == LINK
    listed = {u["username"]: u for u in admin.get("/api/v1/users")["users"]}
    assert listed["bob"]["agentUserGroup"] == LINK and "agentUserGroup" not in listed["carol"]
    assert as_bob.get("/api/v1/me")["user"]["agentUserGroup"] == LINK
    # Nor may a non-admin undo or change it.
    assert _status(lambda: _link(as_bob, bob["id"], {})) == 403

    # Bad values: 400 naming the field, the link unchanged.
    for bad, field in (({"agentUid": -1, "agentGid": 5}, "agentUid"),
                       ({"agentUid": 5, "agentGid": 2**31}, "agentGid"),
                       ({"agentUid": "five", "agentGid": 5}, "agentUid"),
                       ({"agentGid": 5}, "agentUid"),
                       ({"agentUid": 5, "agentGid": 5, "agentUser": "no spaces"}, "agentUser"),
                       ({"agentUid": 5, "agentGid": 5, "agentGroup": "-g"}, "agentGroup")):
        status, message = _error(lambda b=bad: _link(admin, carol["id"], b))
        assert (status, field in message) == (400, True), (bad, message)
    assert "agentUserGroup" not in admin.get(f"/api/v1/users/{carol['id']}")["user"]
    status, message = _error(lambda: admin.post("/api/v1/users", {
        "user": {"username": "dave", "admin": False, "active": True, "agentUserGroup": {"agentUid": -3}},
        "password": PASSWORD}))
    assert status == 400 and "agentUid" in message

    # Created linked; names optional; the link survives a restart; {} unlinks.
    erin = admin.post("/api/v1/users", {
        "user": {"username": "erin", "admin": False, "active": True,
                 "agentUserGroup": {"agentUid": 7, "agentGid": 8}},
        "password": PASSWORD})["user"]
    assert erin["agentUserGroup"] == {"agentUid": 7, "agentGid": 8}
    any_master.stop()
    any_master.start()
    admin = any_master.admin()
    assert admin.get(f"/api/v1/users/{bob['id']}")["user"]["agentUserGroup"] == LINK
    assert "agentUserGroup" not in _link(admin, erin["id"], {})
    assert "agentUserGroup" not in admin.get(f"/api/v1/users/{erin['id']}")["user"]


def _whoami_config(name: str) -> str:
    return yaml.safe_dump({
        "name": name, "entrypoint": "python3 whoami.py", "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
    })


def _report(text: str) -> dict:
    line = next((ln for ln in text.splitlines() if ln.startswith("WHOAMI ")), None)
    assert line is not None, f"the task printed no report:\n{text[-3000:]}"
    return json.loads(line[len("WHOAMI "):])


def _run_trial(client: Client, name: str) -> tuple[int, dict]:
    exp_id = create_experiment(client, _whoami_config(name), WHOAMI)["experiment"]["id"]
    wait_experiment(client, exp_id, TERMINAL)
    return exp_id, _report(trial_log_text(client, trials(client, exp_id)[0]["id"]))


def _run_command(client: Client) -> dict:
    task = client.post("/api/v1/commands", {"config": {"entrypoint": ["python3", "whoami.py"]},
                                            "files": context_files(WHOAMI)})["command"]["id"]
    wait_for(lambda: client.get(f"/api/v1/commands/{task}")["command"]["state"] == "STATE_TERMINATED",
             what=f"command {task} to end")
    logs = client.get(f"/api/v1/tasks/{task}/logs")
    return _report("".join(r["result"]["log"] for r in (logs if isinstance(logs, list) else [logs])))


def test_a_non_admins_trial_acts_as_its_owner_until_it_ends(master: MasterProcess) -> None:
    admin = master.admin()
    _create(admin, "mallory")
    mallory = _as(master, "mallory")
    exp_id, report = _run_trial(mallory, "whoami")
    assert report["det_user"] == "mallory"
    assert (report["me_status"], report["me"]) == (200, "mallory")
    assert report["create_user"] in (403, 404)  # an admin-only route: refused
    assert "made-by-a-task" not in {u["username"] for u in admin.get("/api/v1/users")["users"]}
    # The allocation has ended: its user token with it.
    assert wait_experiment(mallory, exp_id, TERMINAL)
    assert _status(lambda: Client(master.url, report["token"]).get("/api/v1/me")) == 401
    # A token per allocation: the next trial's is another.
    assert _run_trial(mallory, "again")[1]["token"] not in ("", report["token"])


def test_a_restart_revokes_the_user_tokens_of_the_tasks_it_ends(master: MasterProcess) -> None:
    admin = master.admin()
    _create(admin, "oscar")
    oscar = _as(master, "oscar")
    sleeper = yaml.safe_dump({
        "name": "sleeper", "max_restarts": 0,
        "entrypoint": "python3 -c \"import os, time; print('TOKEN', os.environ['DET_USER_TOKEN'], "
                      "flush=True); time.sleep(600)\"",
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
    })
    exp_id = create_experiment(oscar, sleeper, None)["experiment"]["id"]
    trial_id = wait_for(lambda: (ts := trials(oscar, exp_id)) and ts[0]["id"], what="a trial")
    line = wait_for(lambda: next((ln for ln in trial_log_text(oscar, trial_id).splitlines()
                                  if ln.startswith("TOKEN ")), None), what="the task's token")
    token = line.split()[1]
    assert Client(master.url, token).get("/api/v1/me")["user"]["username"] == "oscar"
    master.kill9()  # no chance to end the allocation
    master.start()
    assert _status(lambda: Client(master.url, token).get("/api/v1/me")) == 401
    master.admin().post(f"/api/v1/experiments/{exp_id}/kill")


@pytest.mark.skipif(os.geteuid() != 0, reason="an agent switches a task's uid/gid only when it "
                    "runs as root; as another user it runs every task as itself")
def test_a_linked_owners_trial_and_command_run_as_the_link(master: MasterProcess) -> None:
    admin = master.admin()
    nobody = pwd.getpwnam("nobody")
    group = grp.getgrgid(nobody.pw_gid).gr_name
    uid, gid = nobody.pw_uid, nobody.pw_gid
    trent = _create(admin, "trent")
    _link(admin, trent["id"], {"agentUid": uid, "agentGid": gid, "agentUser": "nobody", "agentGroup": group})
    as_trent = _as(master, "trent")
    _, report = _run_trial(as_trent, "linked")
    assert (report["uid"], report["gid"], report["det_user"], report["me"]) == (uid, gid, "trent", "trent")
    command = _run_command(as_trent)
    assert (command["uid"], command["gid"], command["me"]) == (uid, gid, "trent")
    # Unlinked, the same user's next task runs as the agent's default account instead.
    _link(admin, trent["id"], {})
    _, unlinked = _run_trial(as_trent, "unlinked")
    assert unlinked["uid"] not in (0, uid) and unlinked["me"] == "trent"


def test_our_det_cli_links_users(master: MasterProcess, tmp_path: Path) -> None:
    det_bin = Path(sys.executable).parent / "det"
    if not det_bin.exists():
        pytest.skip(f"{det_bin} is missing: run pip install -e . to install the det console script")
    admin = master.admin()
    fay = _create(admin, "fay")
    _create(admin, "gus")
    base = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    base.update(DET_MASTER=master.url, DET_JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"))

    def det(user: str, password: str, *argv: str) -> subprocess.CompletedProcess:
        done = subprocess.run([str(det_bin), "-u", user, *argv], env={**base, "DET_PASS": password},
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert "Traceback" not in done.stderr
        return done

    done = det("admin", ADMIN_PASSWORD, "user", "link-with-agent-user", "fay", "--agent-uid", "1500",
               "--agent-gid", "1600", "--agent-user", "fay", "--agent-group", "ml")
    assert done.returncode == 0, done.stderr
    assert "uid 1500, gid 1600 (fay/ml)" in done.stdout
    assert admin.get(f"/api/v1/users/{fay['id']}")["user"]["agentUserGroup"] == {
        "agentUid": 1500, "agentGid": 1600, "agentUser": "fay", "agentGroup": "ml"}
    refused = det("gus", PASSWORD, "user", "link-with-agent-user", "gus", "--agent-uid", "0", "--agent-gid", "0")
    assert refused.returncode != 0 and "ADMINISTRATE_USER" in refused.stderr
    bad = det("admin", ADMIN_PASSWORD, "user", "link-with-agent-user", "gus", "--agent-uid", "5",
              "--agent-gid", "5", "--agent-user", "not valid")
    assert bad.returncode != 0 and "agentUser" in bad.stderr
