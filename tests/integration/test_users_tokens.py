"""Users, groups and access tokens against a real master, on SQLite and PostgreSQL.

Credential changes (deactivation, password change, revocation, expiry) must be refused on the
very next request — no sleep and no cache window (reliability A2); a non-admin must not be able
to create users or grant admin, and the role table must be unchanged afterwards (R2).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from det_jupyter.store import make_engine, sqlite_url
from tests._master import ADMIN_PASSWORD, ApiError, Client, MasterProcess

PASSWORD = "Str0ng-Passw0rd"


def _status(call: Any) -> int:
    with pytest.raises(ApiError) as err:
        call()
    return err.value.status


def _message(call: Any) -> str:
    with pytest.raises(ApiError) as err:
        call()
    body = err.value.body
    return body["message"] if isinstance(body, dict) else str(body)


def _create(admin: Client, name: str, *, is_admin: bool = False) -> dict:
    return admin.post("/api/v1/users", {"user": {"username": name, "admin": is_admin,
                                                 "active": True},
                                        "password": PASSWORD, "isHashed": False})["user"]


def _login(m: MasterProcess, name: str, password: str = PASSWORD) -> Client:
    return Client(m.url, m.login(name, password))


def _role_table(m: MasterProcess) -> list[tuple]:
    """Every row of the role table and every user's admin flag, read from the database."""
    engine = make_engine(m.db_url or sqlite_url(str(m.data_dir / "det.db")))
    try:
        with engine.connect() as conn:
            roles = conn.execute(sa.text("SELECT role, user_id, group_id, workspace_id "
                                         "FROM role_assignments ORDER BY id")).all()
            flags = conn.execute(sa.text("SELECT id, admin FROM users ORDER BY id")).all()
    finally:
        engine.dispose()
    return [tuple(r) for r in roles] + [("admin-flag", *f) for f in flags]


def test_deactivation_and_password_change_take_effect_on_the_next_request(
        any_master: MasterProcess) -> None:
    admin = any_master.admin()
    bob = _create(admin, "bob")
    assert bob["active"] and not bob["admin"]
    session = _login(any_master, "bob")
    token = session.post("/api/v1/tokens", {"lifespan": "2h", "description": "ci"})["token"]
    as_token = Client(any_master.url, token)
    assert session.get("/api/v1/me")["user"]["username"] == "bob"
    assert as_token.get("/api/v1/me")["user"]["username"] == "bob"  # now in the 1 s cache

    admin.request("PATCH", f"/api/v1/users/{bob['id']}", {"active": False})
    assert _status(lambda: session.get("/api/v1/me")) == 401
    assert _status(lambda: as_token.get("/api/v1/me")) == 401
    assert _status(lambda: any_master.login("bob", PASSWORD)) == 403
    listed = {u["username"]: u for u in admin.get("/api/v1/users")["users"]}
    assert listed["bob"]["active"] is False
    assert "bob" not in {u["username"] for u in admin.get("/api/v1/users?active=true")["users"]}

    admin.request("PATCH", f"/api/v1/users/{bob['id']}", {"active": True})
    assert as_token.get("/api/v1/me")["user"]["username"] == "bob"  # tokens resume
    assert _status(lambda: session.get("/api/v1/me")) == 401  # the old session was revoked
    first, second = _login(any_master, "bob"), _login(any_master, "bob")
    first.get("/api/v1/me"), second.get("/api/v1/me")

    # Own password change: the caller's session survives, every other one dies at once.
    first.post(f"/api/v1/users/{bob['id']}/password", "N3w-Passw0rd")
    assert first.get("/api/v1/me")["user"]["username"] == "bob"
    assert _status(lambda: second.get("/api/v1/me")) == 401
    assert _status(lambda: any_master.login("bob", PASSWORD)) == 403
    third = _login(any_master, "bob", "N3w-Passw0rd")
    third.get("/api/v1/me")
    # An admin's change kills all of them.
    admin.request("PATCH", f"/api/v1/users/{bob['id']}", {"password": "Th1rd-Passw0rd"})
    assert _status(lambda: first.get("/api/v1/me")) == 401
    assert _status(lambda: third.get("/api/v1/me")) == 401
    _login(any_master, "bob", "Th1rd-Passw0rd").get("/api/v1/me")


@pytest.mark.parametrize("password, rule", [
    ("Sh0rt", "at least 8 characters"), ("no-upper-1", "an upper-case letter"),
    ("NO-LOWER-1", "a lower-case letter"), ("No-Digits-Here", "a digit"), ("", "is required"),
])
def test_password_policy_names_the_rule(master: MasterProcess, password: str, rule: str) -> None:
    admin = master.admin()
    body = {"user": {"username": "carol", "active": True}, "password": password}
    msg = _message(lambda: admin.post("/api/v1/users", body))
    assert rule in msg
    assert _status(lambda: admin.post("/api/v1/users", body)) == 400
    carol = _create(admin, "carol")
    assert rule in _message(lambda: admin.post(f"/api/v1/users/{carol['id']}/password", password))
    assert rule in _message(lambda: admin.request("PATCH", f"/api/v1/users/{carol['id']}",
                                                  {"password": password}))


def test_non_admin_cannot_create_users_or_grant_admin(any_master: MasterProcess) -> None:
    admin = any_master.admin()
    dave = _create(admin, "dave")
    erin = _create(admin, "erin")
    before = _role_table(any_master)
    d = _login(any_master, "dave")
    assert _status(lambda: d.post("/api/v1/users", {"user": {"username": "x"},
                                                    "password": PASSWORD})) == 403
    for body in ({"admin": True}, {"active": False}, {"username": "dave2"}):
        assert _status(lambda b=body: d.request("PATCH", f"/api/v1/users/{dave['id']}", b)) == 403
    assert _status(lambda: d.request("PATCH", f"/api/v1/users/{erin['id']}",
                                     {"displayName": "E"})) == 403
    assert _status(lambda: d.post(f"/api/v1/users/{erin['id']}/password", "Any-Passw0rd")) == 403
    assert _status(lambda: d.post("/api/v1/tokens", {"userId": erin["id"]})) == 403
    assert _status(lambda: d.post("/api/v1/groups", {"name": "g"})) == 403
    assert _role_table(any_master) == before
    assert not admin.get(f"/api/v1/users/{dave['id']}")["user"]["admin"]
    # What users may do to themselves, and what everyone may read.
    d.request("PATCH", f"/api/v1/users/{dave['id']}", {"displayName": "Dave D."})
    assert d.get(f"/api/v1/users/{dave['id']}")["user"]["displayName"] == "Dave D."
    assert {"admin", "dave", "erin"} <= {u["username"] for u in d.get("/api/v1/users")["users"]}

    # An admin grants admin: the ClusterAdmin role comes with it, and goes with it.
    admin.request("PATCH", f"/api/v1/users/{dave['id']}", {"admin": True})
    d.post("/api/v1/users", {"user": {"username": "frank"}, "password": PASSWORD})
    admin.request("PATCH", f"/api/v1/users/{dave['id']}", {"admin": False})
    assert _status(lambda: d.post("/api/v1/users", {"user": {"username": "gina"},
                                                    "password": PASSWORD})) == 403
    # The built-in admin keeps its flag and cannot be switched off; names are unique.
    admin_id = admin.get("/api/v1/me")["user"]["id"]
    for body in ({"active": False}, {"admin": False}, {"username": "root"}):
        assert _status(lambda b=body: admin.request("PATCH", f"/api/v1/users/{admin_id}", b)) == 409
    assert _status(lambda: _create(admin, "erin")) == 409
    admin.request("PATCH", f"/api/v1/users/{erin['id']}", {"username": "erin2"})
    assert admin.get("/api/v1/users/erin2/by-username")["user"]["id"] == erin["id"]
    assert _status(lambda: admin.get("/api/v1/users/999999")) == 404


def test_groups_crud(any_master: MasterProcess) -> None:
    admin = any_master.admin()
    u1, u2 = _create(admin, "hank"), _create(admin, "ivy")
    g = admin.post("/api/v1/groups", {"name": "team", "addUsers": [u1["id"]]})["group"]
    assert g["name"] == "team" and [u["username"] for u in g["users"]] == ["hank"]
    assert _status(lambda: admin.post("/api/v1/groups", {"name": "team"})) == 409
    assert _status(lambda: admin.post("/api/v1/groups", {"name": "x", "addUsers": [999]})) == 404
    hank = _login(any_master, "hank")
    found = hank.post("/api/v1/groups/search", {"name": "team", "limit": 1})["groups"]
    assert found == [{"group": {"groupId": g["groupId"], "name": "team"}, "numMembers": 1}]
    assert hank.post("/api/v1/groups/search", {"userId": u2["id"], "limit": 10})["groups"] == []
    assert _status(lambda: hank.request("PUT", f"/api/v1/groups/{g['groupId']}",
                                        {"groupId": g["groupId"], "name": "mine"})) == 403

    gid = g["groupId"]
    g = admin.request("PUT", f"/api/v1/groups/{gid}", {"groupId": gid, "addUsers": [u2["id"]],
                                                       "removeUsers": [u1["id"]]})["group"]
    assert [u["username"] for u in g["users"]] == ["ivy"]
    g = admin.request("PUT", f"/api/v1/groups/{gid}", {"groupId": gid, "name": "crew"})["group"]
    assert hank.get(f"/api/v1/groups/{gid}")["group"]["name"] == "crew"
    assert "not members" in _message(lambda: admin.request(
        "PUT", f"/api/v1/groups/{gid}", {"groupId": gid, "removeUsers": [u1["id"]]}))
    found = admin.post("/api/v1/groups/search", {"userId": u2["id"], "limit": 10})
    assert [r["group"]["name"] for r in found["groups"]] == ["crew"]
    assert found["pagination"]["total"] == 1
    admin.request("DELETE", f"/api/v1/groups/{gid}")
    assert _status(lambda: admin.get(f"/api/v1/groups/{gid}")) == 404


def test_access_tokens(any_master: MasterProcess) -> None:
    admin = any_master.admin()
    jo = _create(admin, "jo")
    _create(admin, "kim")
    j = _login(any_master, "jo")
    made = j.post("/api/v1/tokens", {"lifespan": "720h", "description": "nightly"})
    token, tid = made["token"], made["tokenId"]
    other = admin.post("/api/v1/tokens", {"userId": jo["id"], "lifespan": "30d"})
    as_token = Client(any_master.url, token)
    assert as_token.get("/api/v1/me")["user"]["username"] == "jo"

    listed = j.get("/api/v1/tokens")
    assert {t["id"] for t in listed["tokenInfo"]} == {tid, other["tokenId"]}
    assert all(token not in str(t) for t in listed["tokenInfo"])
    info = j.get(f"/api/v1/tokens/{tid}")["tokenInfo"]
    assert info["userId"] == jo["id"] and info["description"] == "nightly"
    assert info["tokenType"] == "TOKEN_TYPE_ACCESS_TOKEN" and info["revoked"] is False
    assert j.get(f"/api/v1/tokens?tokenIds={tid}")["tokenInfo"][0]["id"] == tid
    kim = _login(any_master, "kim")
    assert _status(lambda: kim.get(f"/api/v1/tokens/{tid}")) == 404  # hidden
    assert kim.get("/api/v1/tokens")["tokenInfo"] == []
    assert _status(lambda: kim.get("/api/v1/tokens?username=jo")) == 403
    assert {t["id"] for t in admin.get("/api/v1/tokens?username=jo")["tokenInfo"]} >= {tid}

    for bad, what in (("soon", "not a duration"), ("0h", "longer than zero"),
                      ("100000d", "maximum")):
        assert what in _message(lambda b=bad: j.post("/api/v1/tokens", {"lifespan": b}))

    j.request("PATCH", f"/api/v1/tokens/{tid}", {"tokenId": tid, "description": "renamed"})
    assert as_token.get("/api/v1/me")["user"]["username"] == "jo"  # cached, then revoked:
    j.request("PATCH", f"/api/v1/tokens/{tid}", {"tokenId": str(tid), "setRevoked": True})
    assert _status(lambda: as_token.get("/api/v1/me")) == 401
    assert tid not in {t["id"] for t in j.get("/api/v1/tokens")["tokenInfo"]}
    shown = j.get("/api/v1/tokens?showInactive=true")["tokenInfo"]
    assert {t["id"]: t for t in shown}[tid]["revoked"] is True
    # Logging out with an access token does not revoke it.
    keep = Client(any_master.url, other["token"])
    keep.post("/api/v1/auth/logout")
    assert keep.get("/api/v1/me")["user"]["username"] == "jo"

    brief = j.post("/api/v1/tokens", {"lifespan": "300ms"})
    short = Client(any_master.url, brief["token"])
    time.sleep(0.4)
    assert _status(lambda: short.get("/api/v1/me")) == 401


def test_tokens_are_stored_hashed(master: MasterProcess) -> None:
    admin = master.admin()
    token = admin.post("/api/v1/tokens", {"description": "canary"})["token"]
    session = master.login("admin")
    with contextlib.closing(sqlite3.connect(master.data_dir / "det.db")) as db:
        dump = "\n".join(db.iterdump())
    assert "canary" in dump  # the row is there …
    assert token not in dump and session not in dump  # … but not the secrets


def test_our_det_cli_users_groups_tokens(master: MasterProcess, tmp_path: Path) -> None:
    """det-jupyter's own ``det user|user-group|token`` against the same routes."""
    env = {k: v for k, v in os.environ.items() if k not in ("DET_USER", "DET_PASS")}
    env.update(DET_MASTER=master.url, DET_JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"))

    def det(*argv: str, stdin: str = "", ok: bool = True, **extra: str) -> str:
        done = subprocess.run([sys.executable, "-m", "det_jupyter.cli.det", *argv], input=stdin,
                              env={**env, **extra}, capture_output=True, text=True, timeout=60)
        assert "Traceback" not in done.stderr, done.stderr
        assert (done.returncode == 0) == ok, f"det {' '.join(argv)}: {done.stdout}{done.stderr}"
        return done.stdout + done.stderr

    det("user", "login", "admin", stdin=ADMIN_PASSWORD + "\n")
    det("user", "create", "lea", "--password", PASSWORD)
    assert "the password must have a digit" in det("user", "create", "max", "--password",
                                                   "No-Digits-Here", ok=False)
    det("user", "create", "max", stdin="M4x-Passw0rd\n")
    det("user", "edit", "lea", "--display-name", "Lea L.", "--admin")
    users = {u["username"]: u for u in json.loads(det("user", "list", "--json"))}
    assert users["lea"]["admin"] and users["lea"]["displayName"] == "Lea L."
    det("user", "edit", "lea", "--remove-admin")
    det("user", "deactivate", "max")
    assert "max" not in det("user", "list") and "max" in det("user", "list", "--all")
    det("user", "activate", "max")
    det("user", "change-password", "max", stdin="Fr3sh-Passw0rd\n")
    master.login("max", "Fr3sh-Passw0rd")

    det("user-group", "create", "ops", "--add-user", "lea")
    det("user-group", "add-user", "ops", "max")
    assert json.loads(det("user-group", "describe", "ops", "--json"))["users"][1]["username"] == "max"
    det("user-group", "remove-user", "ops", "lea,max")
    det("user-group", "change-name", "ops", "sre")
    assert "sre" in det("user-group", "list")
    assert "--yes" in det("user-group", "delete", "sre", ok=False)
    det("user-group", "delete", "sre", "--yes")

    made = json.loads(det("token", "create", "lea", "--lifespan", "2h", "-d", "bot", "--json"))
    assert "not a duration" in det("token", "create", "--lifespan", "later", ok=False)
    assert json.loads(det("token", "describe", str(made["tokenId"]), "--json"))[0]["userId"] \
        == users["lea"]["id"]
    own = {**env, "DET_JUPYTER_CONFIG_DIR": str(tmp_path / "lea")}
    assert "Authenticated as lea" in det("token", "login", made["token"], **own)
    assert "'lea'" in det("user", "whoami", **own)
    det("token", "revoke", str(made["tokenId"]))
    assert "401" in det("user", "whoami", ok=False, **own)
