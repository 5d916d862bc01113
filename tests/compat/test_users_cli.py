"""The stock CLI (determined==0.38.1) administers det-jupyter's users, groups and tokens:
``det user create|list|activate|deactivate|change-password|edit|whoami``,
``det user-group …`` and ``det token …``. Each command must exit 0 and change what the master
reports over REST (or, refused, exit non-zero with our message and no traceback).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from tests._master import ADMIN_PASSWORD, ApiError, Client, MasterProcess

pytestmark = pytest.mark.compat
ADMIN = {"DET_USER": "admin", "DET_PASS": ADMIN_PASSWORD}
PASSWORD = "Str0ng-Passw0rd"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("users-cli") / "master",
                      extra_args=["--no-agent"]).start()
    yield m
    m.stop()


def det(det_env: Any, m: MasterProcess, args: Sequence[str], *, env: dict[str, str] | None = None,
        input: str | None = None, ok: bool = True,  # noqa: A002
        stock_traceback: bool = False) -> subprocess.CompletedProcess[str]:
    """The stock ``det`` in a new session: no controlling terminal, so ``getpass`` reads stdin.
    ``stock_traceback``: the stock client itself dies with one here (e.g. prompting on an
    empty stdin), not because of anything the master said."""
    res = subprocess.run([str(det_env.det_bin), *args], input=input, capture_output=True,
                         text=True, timeout=120, env=det_env.env(m.url, env if env is not None else ADMIN),
                         cwd=det_env.home, check=False, start_new_session=True)
    if not stock_traceback:
        assert "Traceback" not in res.stderr, res.stderr
    if ok:
        assert res.returncode == 0, f"det {' '.join(args)}: exit {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res


def _user(admin: Client, name: str) -> dict:
    return admin.get(f"/api/v1/users/{name}/by-username")["user"]


def test_stock_det_user_commands(det_env, cluster: MasterProcess) -> None:
    admin = cluster.admin()
    det(det_env, cluster, ["user", "create", "alice", "--password", PASSWORD])
    alice = _user(admin, "alice")
    assert alice["active"] and not alice["admin"]
    det(det_env, cluster, ["user", "create", "boss", "--admin", "--password", PASSWORD])
    assert _user(admin, "boss")["admin"] is True

    as_alice = {"DET_USER": "alice", "DET_PASS": PASSWORD}
    assert "'alice'" in det(det_env, cluster, ["user", "whoami"], env=as_alice).stdout
    listed = det(det_env, cluster, ["user", "list"]).stdout
    assert "alice" in listed and "boss" in listed

    det(det_env, cluster, ["user", "deactivate", "alice"])
    assert _user(admin, "alice")["active"] is False
    assert "alice" not in det(det_env, cluster, ["user", "list"]).stdout
    assert "alice" in det(det_env, cluster, ["user", "list", "--all"]).stdout
    with pytest.raises(ApiError) as err:
        cluster.login("alice", PASSWORD)
    assert err.value.status == 403
    det(det_env, cluster, ["user", "activate", "alice"])
    assert _user(admin, "alice")["active"] is True

    # An admin changes alice's password (prompted twice on stdin); then alice changes her own.
    det(det_env, cluster, ["user", "change-password", "alice"], input="N3w-Passw0rd\nN3w-Passw0rd\n")
    cluster.login("alice", "N3w-Passw0rd")
    as_alice["DET_PASS"] = "N3w-Passw0rd"
    det(det_env, cluster, ["user", "change-password"], env=as_alice,
        input="Th1rd-Passw0rd\nTh1rd-Passw0rd\n")
    cluster.login("alice", "Th1rd-Passw0rd")
    as_alice["DET_PASS"] = "Th1rd-Passw0rd"

    det(det_env, cluster, ["user", "edit", "alice", "--display-name", "Alice A."])
    assert _user(admin, "alice")["displayName"] == "Alice A."
    # alice may not make herself admin: refused with our message, nothing changed.
    res = det(det_env, cluster, ["user", "edit", "alice", "--admin", "true"], env=as_alice, ok=False)
    assert res.returncode != 0 and "ADMINISTRATE_USER" in res.stderr + res.stdout
    assert _user(admin, "alice")["admin"] is False
    det(det_env, cluster, ["user", "edit", "alice", "--admin", "true"])
    assert _user(admin, "alice")["admin"] is True


def test_stock_det_user_group_commands(det_env, cluster: MasterProcess) -> None:
    admin = cluster.admin()
    for name in ("gus", "hal"):
        det(det_env, cluster, ["user", "create", name, "--password", PASSWORD])
    out = det(det_env, cluster, ["user-group", "create", "team", "--add-user", "gus"]).stdout
    assert "team" in out and "gus" in out
    det(det_env, cluster, ["user-group", "add-user", "team", "hal"])
    described = json.loads(det(det_env, cluster, ["user-group", "describe", "team", "--json"]).stdout)
    assert sorted(u["username"] for u in described["users"]) == ["gus", "hal"]
    det(det_env, cluster, ["user-group", "remove-user", "team", "gus"])
    det(det_env, cluster, ["user-group", "change-name", "team", "crew"])
    listed = json.loads(det(det_env, cluster, ["user-group", "list", "--json"]).stdout)
    assert [(g["group"]["name"], g["numMembers"]) for g in listed["groups"]] == [("crew", 1)]
    mine = det(det_env, cluster, ["user-group", "list", "--groups-user-belongs-to", "hal"]).stdout
    assert "crew" in mine
    assert "crew" in det(det_env, cluster, ["user-group", "describe", "crew"]).stdout
    det(det_env, cluster, ["user-group", "delete", "crew", "--yes"])
    assert admin.post("/api/v1/groups/search", {"limit": 10}).get("groups") in (None, [])


def test_stock_det_token_commands(det_env, cluster: MasterProcess) -> None:
    det(det_env, cluster, ["user", "create", "ivan", "--password", PASSWORD])
    as_ivan = {"DET_USER": "ivan", "DET_PASS": PASSWORD}
    made = json.loads(det(det_env, cluster, ["token", "create", "-e", "2", "-d", "ci", "--json"],
                          env=as_ivan).stdout)
    token, tid = made["token"], made["tokenId"]
    assert Client(cluster.url, token).get("/api/v1/me")["user"]["username"] == "ivan"

    listed = json.loads(det(det_env, cluster, ["token", "list", "--json"], env=as_ivan).stdout)
    assert [t["id"] for t in listed] == [tid] and listed[0]["description"] == "ci"
    assert token not in json.dumps(listed)
    described = json.loads(det(det_env, cluster, ["token", "describe", str(tid), "--json"],
                               env=as_ivan).stdout)
    assert described[0]["tokenType"] == "TOKEN_TYPE_ACCESS_TOKEN"
    det(det_env, cluster, ["token", "edit", str(tid), "-d", "nightly"], env=as_ivan)
    # An admin sees ivan's token and can make one for him.
    assert "nightly" in det(det_env, cluster, ["token", "list", "ivan"]).stdout
    det(det_env, cluster, ["token", "create", "ivan"])

    # `det token login` caches the token; later commands run as ivan without a password.
    fresh = {"XDG_CONFIG_HOME": str(det_env.home / "token-login")}
    assert "ivan" in det(det_env, cluster, ["token", "login", token], env=fresh).stdout
    assert "'ivan'" in det(det_env, cluster, ["user", "whoami"], env=fresh).stdout

    det(det_env, cluster, ["token", "revoke", str(tid)], env=as_ivan)
    with pytest.raises(ApiError) as err:
        Client(cluster.url, token).get("/api/v1/me")
    assert err.value.status == 401
    # The cached token is refused now: the stock client falls back to asking for a password.
    res = det(det_env, cluster, ["user", "whoami"], env=fresh, ok=False, stock_traceback=True)
    assert res.returncode != 0 and "ivan" not in res.stdout
