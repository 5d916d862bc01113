"""The authorization matrix (reliability.md G4, A1, R1–R3), generated from the OpenAPI
document the master serves: every HTTP and websocket route × {anonymous, bad token, expired
token, revoked token, deactivated user, outsider, each pre-canned role on the workspace,
ClusterAdmin, WorkspaceCreator}.

One real master (SQLite) holds a private workspace WA with a project, a finished experiment
(trial, checkpoint), a model with a version, a template and a command, all named with the
marker ``wa-secret``. For each route the expected outcome follows from the permission the
route declares and the roles' definitions:

- no valid credential → 401 (403/404 accepted; never a success, never a websocket 101);
- a workspace route on a WA object → 404 for whoever may not see it (outsiders, lower
  roles without the view permission), 403 for whoever sees it but may not act, success (not
  401/403/404) for every role that holds the permission;
- a cluster route → 403 without the cluster permission, not 401/403 with it;
- every list a principal without the view permission reads holds no ``wa-secret``.
"""

from __future__ import annotations

import http.client
import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from det_jupyter.services.access.authz import ROLES, VIEW_OF, Perm
from tests._master import ApiError, Client, MasterProcess, create_experiment, wait_experiment
from tests.conftest import backend_db_url
from tests.integration._exp import COUNTER, counter_config

PW = "Matrix-Passw0rd"
MARK = "wa-secret"
WA_ROLES = ("ModelRegistryViewer", "Viewer", "EditorRestricted", "EditorProjectRestricted", "Editor",
            "WorkspaceAdmin")
INVALID = ("anonymous", "bad-token", "expired-token", "revoked-token", "deactivated-user")


@dataclass
class World:
    master: MasterProcess
    admin: Client
    tokens: dict[str, str | None] = field(default_factory=dict)  # principal -> bearer token
    user_ids: dict[str, int] = field(default_factory=dict)
    own_token_ids: dict[str, int] = field(default_factory=dict)
    roles: dict[str, tuple[str, bool]] = field(default_factory=dict)  # principal -> (role, on cluster)
    ids: dict[str, Any] = field(default_factory=dict)


def _create_user(admin: Client, name: str) -> int:
    body = admin.post("/api/v1/users", {"user": {"username": name, "active": True, "admin": False},
                                        "password": PW})
    return int(body["user"]["id"])


def _assign(admin: Client, uid: int, role_id: int, ws: int | None) -> None:
    ra: dict[str, Any] = {"role": {"roleId": role_id}}
    if ws is not None:
        ra["scopeWorkspaceId"] = ws
    admin.post("/api/v1/roles/add-assignments", {"userRoleAssignments": [{"userId": uid, "roleAssignment": ra}]})


def _role_ids(admin: Client) -> dict[str, int]:
    return {r["name"]: r["roleId"] for r in admin.post("/api/v1/roles/search", {"limit": 100})["roles"]}


def _login(m: MasterProcess, name: str) -> str:
    return m.login(name, PW)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    m = MasterProcess(tmp_path_factory.mktemp("matrix") / "master", db_url=backend_db_url(request)).start()
    admin = m.admin()
    w = World(m, admin)
    try:
        _build(w)
        yield w
    finally:
        m.stop()


def _build(w: World) -> None:
    admin, m = w.admin, w.master
    role_ids = _role_ids(admin)
    wa = admin.post("/api/v1/workspaces", {"name": f"{MARK}-ws"})["workspace"]["id"]
    wb = admin.post("/api/v1/workspaces", {"name": "public-ws"})["workspace"]["id"]
    pa = admin.post(f"/api/v1/workspaces/{wa}/projects", {"name": f"{MARK}-proj", "workspaceId": wa})["project"]["id"]
    w.ids.update(wa=wa, wb=wb, pa=pa)

    for role in WA_ROLES:
        name = f"u-{role.lower()}"
        uid = w.user_ids[role] = _create_user(admin, name)
        _assign(admin, uid, role_ids[role], wa)
        w.tokens[role] = _login(m, name)
        w.roles[role] = (role, False)
    for role in ("ClusterAdmin", "WorkspaceCreator"):
        name = f"u-{role.lower()}"
        uid = w.user_ids[role] = _create_user(admin, name)
        _assign(admin, uid, role_ids[role], None)
        w.tokens[role] = _login(m, name)
        w.roles[role] = (role, True)
    # The outsider: Editor on WB (and, as every new user, on Uncategorized), nothing on WA.
    uid = w.user_ids["outsider"] = _create_user(admin, "u-outsider")
    _assign(admin, uid, role_ids["Editor"], wb)
    w.tokens["outsider"] = _login(m, "u-outsider")
    w.roles["outsider"] = ("Editor", False)

    # Invalid credentials of every kind.
    w.tokens["anonymous"] = None
    w.tokens["bad-token"] = "not-a-token-at-all"
    uid = w.user_ids["expired-token"] = _create_user(admin, "u-expiring")
    _assign(admin, uid, role_ids["WorkspaceAdmin"], wa)
    tok = Client(m.url, _login(m, "u-expiring")).post("/api/v1/tokens", {"lifespan": "1s"})
    w.tokens["expired-token"] = tok["token"]
    uid = w.user_ids["revoked-token"] = _create_user(admin, "u-revoked")
    _assign(admin, uid, role_ids["WorkspaceAdmin"], wa)
    revoked = _login(m, "u-revoked")
    Client(m.url, revoked).post("/api/v1/auth/logout")
    w.tokens["revoked-token"] = revoked
    uid = w.user_ids["deactivated-user"] = _create_user(admin, "u-deactivated")
    _assign(admin, uid, role_ids["WorkspaceAdmin"], wa)
    w.tokens["deactivated-user"] = _login(m, "u-deactivated")
    admin.request("PATCH", f"/api/v1/users/{uid}", {"active": False})

    # Each valid principal's own access token (for the self-scoped token routes).
    for p in (*WA_ROLES, "ClusterAdmin", "WorkspaceCreator", "outsider"):
        info = Client(m.url, w.tokens[p]).post("/api/v1/tokens", {"lifespan": "1d", "description": p})
        w.own_token_ids[p] = int(info["tokenId"])

    # WA's objects.
    cfg = yaml.safe_load(counter_config(length=5, ckpt_every=5))
    cfg["name"] = f"{MARK}-exp"
    exp = create_experiment(admin, yaml.safe_dump(cfg), COUNTER, projectId=pa)["experiment"]["id"]
    wait_experiment(admin, exp, {"STATE_COMPLETED"})
    trial = admin.get(f"/api/v1/experiments/{exp}/trials")["trials"][0]
    ckpt = admin.get(f"/api/v1/experiments/{exp}/checkpoints")["checkpoints"][0]["uuid"]
    admin.post("/api/v1/models", {"name": f"{MARK}-model", "workspaceId": wa})
    admin.post(f"/api/v1/models/{MARK}-model/versions", {"checkpointUuid": ckpt})
    admin.post(f"/api/v1/templates/{MARK}-tmpl", {"name": f"{MARK}-tmpl", "workspaceId": wa,
                                                   "config": {"description": MARK}})
    cmd = admin.post("/api/v1/commands", {"workspaceId": wa, "config": {
        "entrypoint": ["true"], "description": f"{MARK}-cmd"}})["command"]["id"]
    group = admin.post("/api/v1/groups", {"name": f"{MARK}-group", "addUsers": []})["group"]["groupId"]
    w.ids["webhook"] = admin.post("/api/v1/webhooks", {  # its URL refuses connections: a test is a 400
        "name": f"{MARK}-hook", "url": "http://127.0.0.1:9/wa", "webhookType": "WEBHOOK_TYPE_DEFAULT",
        "workspaceId": wa, "triggers": [{"triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE",
                                         "condition": {"state": "COMPLETED"}}]})["webhook"]["id"]
    w.ids.update(exp=exp, trial=trial["id"], task=trial["taskId"], alloc=f"{trial['taskId']}.1",
                 ckpt=ckpt, cmd=cmd, group=group, agent=admin.get("/api/v1/agents")["agents"][0]["id"])
    time.sleep(1.2)  # the 1 s token has expired


# -- the cases ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    verb: str
    template: str
    path: str
    op: dict[str, Any]
    on_wa_object: bool  # the path names one of WA's objects
    self_scoped: bool  # the path names the caller's own user or token


def _fill(template: str, params: list[dict[str, Any]], w: World) -> list[tuple[str, bool, bool]]:
    """Concrete paths for a template: each enum value, WA's object for each id."""
    choices: list[list[tuple[str, str]]] = []
    on_wa, self_scoped = False, False
    for p in params:
        name, schema = p["name"], p["schema"]
        if "enum" in schema:
            choices.append([(name, v) for v in schema["enum"]])
            continue
        value, wa_obj = _value(template, name, w)
        on_wa |= wa_obj
        self_scoped |= value == "{self}"
        choices.append([(name, value)])
    out = []
    for combo in itertools.product(*choices):
        path = template
        for name, value in combo:
            path = path.replace("{" + name + "}", str(value))
        out.append((path, on_wa, self_scoped))
    return out


def _value(template: str, name: str, w: World) -> tuple[Any, bool]:
    ids = w.ids
    if name in ("exp_id", "experiment_id"):
        return ids["exp"], True
    if name in ("trial_id", "run_id"):
        return ids["trial"], True
    if name == "uuid":
        return ids["ckpt"], True
    if name == "allocation_id":
        return ids["alloc"], True
    if name == "resources_id":
        return f"{ids['alloc']}.r0", True
    if name == "task_id":
        if template.startswith(("/api/v1/tasks/",)):
            return ids["task"], True
        return ids["cmd"], True
    if name in ("workspace_id",) or (name in ("id", "ws_id") and "/workspaces/" in template):
        return ids["wa"], True
    if name in ("project_id",) or (name == "id" and "/projects/" in template):
        return ids["pa"], True
    if name in ("name", "model_name", "ident") and "/models/" in template:
        return f"{MARK}-model", True
    if name in ("name", "template_name") and "/templates/" in template:
        return f"{MARK}-tmpl", True
    if name in ("version", "version_num", "number", "model_version"):
        return 1, True
    if name in ("user_id", "token_id"):
        return "{self}", False
    if name == "group_id":
        return ids["group"], False
    if name == "webhook_id":
        return ids["webhook"], True
    if name == "agent_id":
        return "no-such-agent", False
    if name == "slot_id":
        return "0", False
    if name == "username":
        return "admin", False
    if name == "path":
        return "api/status", True
    if name == "label":
        return f"{MARK}-label", True
    if name == "workload":
        return "EXPERIMENT", False
    if name in ("pool", "pool_name", "resource_pool"):
        return "default", False
    if name == "external_experiment_id":  # an unmanaged experiment's: a create (or put) route
        return "matrix-external-id", False
    raise AssertionError(f"the matrix has no value for parameter {name!r} of {template}")


def _cases(w: World) -> list[Case]:
    doc = w.admin.get("/api/v1/openapi.json")
    order = {"get": 0, "put": 1, "post": 1, "patch": 1, "delete": 2}
    cases = []
    for template, item in doc["paths"].items():
        params = item.get("parameters", [])
        for verb, op in item.items():
            if verb not in order:
                continue
            for path, on_wa, self_scoped in _fill(template, params, w):
                cases.append(Case(verb.upper(), template, path, op, on_wa, self_scoped))
    cases.sort(key=lambda c: (order[c.verb.lower()], _delete_rank(c.template)))
    return cases


def _delete_rank(template: str) -> int:
    for i, part in enumerate(("/webhooks/", "/versions/", "/models/", "/templates/", "/checkpoints", "/labels/",
                              "/tensorboard-files",
                              "/experiments/",
                              "/projects/", "/config-policies/", "/workspaces/", "/groups/", "/tokens/", "/users/")):
        if part in template:
            return i
    return 99


# -- calling -----------------------------------------------------------------------------

def _call(w: World, principal: str, case: Case) -> tuple[int, str]:
    token = w.tokens[principal]
    path = case.path
    if case.self_scoped:
        uid = w.user_ids.get(principal, 1)
        tid = w.own_token_ids.get(principal, 999999)
        path = path.replace("{self}", str(tid if "/tokens/" in case.template else uid))
    u = urlparse(w.master.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if case.op.get("x-det-websocket"):
        headers.update({"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    body = None if case.verb in ("GET", "DELETE") else json.dumps(_body(w, case))
    conn.request(case.verb, (u.path.rstrip("/") + path), body=body, headers=headers)
    resp = conn.getresponse()
    text = resp.read(200_000).decode(errors="replace")
    conn.close()
    return resp.status, text


def _body(w: World, case: Case) -> dict[str, Any]:
    """Create routes get a body naming WA, so that what they would create is WA's."""
    ids = w.ids
    if case.template == "/api/v1/experiments" and case.verb == "POST":
        return {"config": counter_config(length=1), "projectId": ids["pa"], "activate": False}
    if case.template in ("/api/v1/commands", "/api/v1/notebooks", "/api/v1/shells", "/api/v1/tensorboards"):
        return {"workspaceId": ids["wa"], "config": {"entrypoint": ["true"]}, "experimentIds": [ids["exp"]]}
    if case.template == "/api/v1/models" and case.verb == "POST":
        return {"name": f"m-{time.monotonic_ns()}", "workspaceId": ids["wa"]}
    if case.template.startswith("/api/v1/templates/") and case.verb in ("POST", "PUT"):
        return {"workspaceId": ids["wa"], "config": {"description": "x"}}
    return {}


def _expect(w: World, principal: str, case: Case) -> str:
    """'allowed', 'denied-404', 'denied-403', 'denied' (401/403/404) or 'skip'."""
    perm_name = case.op.get("x-det-permission")
    if case.op.get("x-det-public") or perm_name is None:
        return "skip"
    if case.template == "/api/v1/auth/logout":
        return "skip"  # it would end the principal's session; A2 tests cover it
    if principal in INVALID:
        return "denied"
    if perm_name in ("AGENT_TOKEN", "JUPYTER_SERVER_USER"):
        return "denied"
    perm = Perm(perm_name)
    role, on_cluster = w.roles[principal]
    if case.template.startswith(("/proxy/", "/det-jupyter/tunnel/")):
        # The owner's (or an admin's) alone; everyone else gets 404. WA's task is a command,
        # not a notebook or shell, so even the admin gets 404 here.
        return "skip" if role == "ClusterAdmin" else "denied-404"
    held = ROLES[role][0]
    if perm is Perm.AUTHENTICATED:
        return "allowed" if case.self_scoped or "{" not in case.template else "skip"
    if case.op.get("x-det-scope") == "cluster":
        return "allowed" if on_cluster and perm in held else "denied-403"
    if not case.on_wa_object:
        return "skip"  # lists and creates: checked by _lists_hide_wa and feature tests
    if principal == "outsider":
        return "denied-404"
    if on_cluster:
        return "allowed" if perm in held else "denied-404"
    if perm in held:
        return "allowed"
    view = VIEW_OF.get(perm)
    return "denied-403" if view is not None and view in held else "denied-404"


_NOT_AUTH_LIMITED = {  # routes whose success also needs something no principal here has
    "/api/v1/allocations/", "/api/v1/checkpoints", "/api/v1/task/logs", "/api/v1/runs/start",
    "/api/v1/notebooks/", "/api/v1/shells/", "/api/v1/tensorboards/", "/proxy/", "/det-jupyter/tunnel/",
    "/api/v1/hub/servers/",
    "/api/v1/trials/{trial_id}/metrics", "/api/v1/trials/{trial_id}/progress",
    "/api/v1/trials/{trial_id}/early_exit", "/api/v1/trials/{trial_id}/runner",
}


def _check(status: int, expected: str, case: Case) -> bool:
    if expected == "denied":
        return status in (401, 403, 404)
    if expected == "denied-404":
        return status == 404
    if expected == "denied-403":
        return status == 403
    if expected == "allowed":
        if any(case.template.startswith(p) or p in case.template for p in _NOT_AUTH_LIMITED):
            return status not in (401,) and status < 500
        bad = (401, 403) if case.op.get("x-det-scope") == "cluster" or not case.on_wa_object else (401, 403, 404)
        return status not in bad and status < 500
    return True


PRINCIPALS = (*INVALID, "outsider", *WA_ROLES, "ClusterAdmin", "WorkspaceCreator")


def test_lists_hide_other_workspaces(world: World) -> None:
    """R1: the outsider sees none of WA's objects in any list; a Viewer does see them."""
    lists = ["/api/v1/experiments", "/api/v1/workspaces", "/api/v1/models", "/api/v1/templates",
             "/api/v1/commands", "/api/v1/job-queues-v2", f"/api/v1/workspaces/{world.ids['wb']}/projects",
             "/api/v1/model/labels", "/api/v1/checkpoints/" + world.ids["ckpt"]]
    outsider = Client(world.master.url, world.tokens["outsider"])
    viewer = Client(world.master.url, world.tokens["Viewer"])
    for path in lists:
        try:
            text = json.dumps(outsider.get(path))
        except ApiError as exc:
            assert exc.status == 404, (path, exc)
            continue
        assert MARK not in text, f"outsider sees a {MARK} object in {path}: {text[:300]}"
    for path in ("/api/v1/experiments", "/api/v1/workspaces", "/api/v1/models", "/api/v1/templates"):
        assert MARK in json.dumps(viewer.get(path)), f"a Viewer of WA should see WA's objects in {path}"


def test_role_escalation_is_refused_and_changes_nothing(world: World) -> None:
    """R2: every role tries to make itself or others more powerful: all 403/404, and the role
    table is the same afterwards."""
    admin, ids = world.admin, world.ids
    role_ids = _role_ids(admin)
    before = admin.post("/api/v1/roles/search/by-ids", {"roleIds": sorted(role_ids.values())})
    for principal in (*WA_ROLES, "WorkspaceCreator", "outsider"):
        c = Client(world.master.url, world.tokens[principal])
        me = world.user_ids[principal]
        attempts = [
            ("POST", "/api/v1/roles/add-assignments", {"userRoleAssignments": [
                {"userId": me, "roleAssignment": {"role": {"roleId": role_ids["ClusterAdmin"]}}}]}),
            ("POST", "/api/v1/roles/add-assignments", {"userRoleAssignments": [
                {"userId": me, "roleAssignment": {"role": {"roleId": role_ids["WorkspaceAdmin"]},
                                                  "scopeWorkspaceId": ids["wb"]}}]}),
            ("PATCH", f"/api/v1/users/{me}", {"admin": True}),
            ("POST", "/api/v1/users", {"user": {"username": f"new-{principal.lower()}", "admin": True},
                                       "password": PW}),
            ("POST", "/api/v1/tokens", {"userId": world.user_ids["ClusterAdmin"], "lifespan": "1d"}),
        ]
        if principal != "WorkspaceAdmin":
            attempts.append(("POST", "/api/v1/roles/add-assignments", {"userRoleAssignments": [
                {"userId": me, "roleAssignment": {"role": {"roleId": role_ids["WorkspaceAdmin"]},
                                                  "scopeWorkspaceId": ids["wa"]}}]}))
        for verb, path, body in attempts:
            with pytest.raises(ApiError) as err:
                c.request(verb, path, body)
            assert err.value.status in (403, 404), (principal, verb, path, err.value)
    after = admin.post("/api/v1/roles/search/by-ids", {"roleIds": sorted(role_ids.values())})
    assert before == after
    assert not admin.get(f"/api/v1/users/{world.user_ids['Editor']}")["user"]["admin"]


def test_workspace_admin_assigns_only_in_its_workspace(world: World) -> None:
    admin, ids = world.admin, world.ids
    role_ids = _role_ids(admin)
    wsadmin = Client(world.master.url, world.tokens["WorkspaceAdmin"])
    target = world.user_ids["outsider"]
    assignment = {"userRoleAssignments": [{"userId": target, "roleAssignment": {
        "role": {"roleId": role_ids["Viewer"]}, "scopeWorkspaceId": ids["wa"]}}]}
    wsadmin.post("/api/v1/roles/add-assignments", assignment)
    outsider = Client(world.master.url, world.tokens["outsider"])
    assert outsider.get(f"/api/v1/experiments/{ids['exp']}")["experiment"]["id"] == ids["exp"]
    wsadmin.post("/api/v1/roles/remove-assignments", assignment)
    with pytest.raises(ApiError) as err:  # on the very next request
        outsider.get(f"/api/v1/experiments/{ids['exp']}")
    assert err.value.status == 404


def test_authorization_matrix(world: World) -> None:
    """Last in this module: its allowed DELETEs remove WA's objects."""
    cases = _cases(world)
    assert len(cases) > 100, "the OpenAPI document lists fewer routes than expected"
    mismatches, checked = [], 0
    for case in cases:
        order = sorted(PRINCIPALS, key=lambda p: _expect(world, p, case) == "allowed")
        allowed_once = False
        for principal in order:
            expected = _expect(world, principal, case)
            if expected == "skip":
                continue
            if expected == "allowed" and case.verb == "DELETE":
                if allowed_once:
                    continue  # the object is gone after the first allowed delete
                allowed_once = True
            status, text = _call(world, principal, case)
            checked += 1
            if case.op.get("x-det-websocket") and status == 101:
                mismatches.append(f"{principal}: {case.verb} {case.path} upgraded to a websocket")
            elif not _check(status, expected, case):
                mismatches.append(f"{principal}: {case.verb} {case.path} -> {status} (expected {expected}): "
                                  f"{text[:160]}")
            if principal in ("outsider", "ModelRegistryViewer") and case.verb == "GET" and 200 <= status < 300 \
                    and "/models" not in case.template and MARK in text:
                mismatches.append(f"{principal}: {case.verb} {case.path} shows a {MARK} object: {text[:160]}")
    print(f"authorization matrix: {checked} calls over {len(cases)} route cases")
    assert checked > 500
    assert not mismatches, f"{len(mismatches)} of {checked} calls:\n" + "\n".join(mismatches[:80])
