"""Config templates over REST on a real master: CRUD, applying one at submit, permissions."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests._master import ADMIN_PASSWORD, ApiError, Client, MasterProcess, create_experiment
from tests.conftest import PG_DSN, PG_SKIP, fresh_pg_database
from tests.integration._exp import COUNTER, counter_config

TEMPLATE = {
    "description": "from-template",
    "max_restarts": 1,  # the config's 5 wins
    "data": {"source": "template", "shards": 2},
    "environment": {"environment_variables": ["FROM_TEMPLATE=1"]},
    "bind_mounts": [{"host_path": "/tmp", "container_path": "/shared", "read_only": True}],
}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def master(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[MasterProcess]:
    """One master per backend for the module: every test uses its own template names."""
    db_url = None
    if request.param == "postgres":
        if not PG_DSN:
            pytest.skip(PG_SKIP)
        db_url = fresh_pg_database()
    m = MasterProcess(tmp_path_factory.mktemp("templates"), db_url=db_url).start()
    yield m
    m.stop()


@pytest.fixture(scope="module")
def admin(master: MasterProcess) -> Client:
    return master.admin()


def _status(fn: object, *args: object, **kw: object) -> tuple[int, str]:
    try:
        fn(*args, **kw)  # type: ignore[operator]
    except ApiError as err:
        body = err.body if isinstance(err.body, dict) else {"message": str(err.body)}
        return err.status, str(body.get("message"))
    return 200, ""


def _put_new(client: Client, name: str, config: object, ws: int = 0) -> dict:
    return client.post(f"/api/v1/templates/{name}", {"name": name, "config": config, "workspaceId": ws})


def test_create_get_list_patch_rename_delete(admin: Client) -> None:
    created = _put_new(admin, "crud-a", {"description": "a"})["template"]
    assert created == {"name": "crud-a", "config": {"description": "a"}, "workspaceId": 1}
    _put_new(admin, "crud-b", {"description": "b"}, ws=1)
    assert admin.get("/api/v1/templates/crud-a") == {"template": created}

    listed = admin.get("/api/v1/templates?name=crud-")
    assert [t["name"] for t in listed["templates"]] == ["crud-a", "crud-b"]
    assert listed["pagination"]["total"] == 2
    page = admin.get("/api/v1/templates?name=CRUD&offset=1&limit=1&workspaceIds=1")
    assert [t["name"] for t in page["templates"]] == ["crud-b"]
    assert page["pagination"] == {"offset": 1, "limit": 1, "startIndex": 1, "endIndex": 2, "total": 2}
    assert admin.get("/api/v1/templates?name=crud-&workspaceIds=99")["templates"] == []

    patched = admin.request("PATCH", "/api/v1/templates/crud-a", {"description": "a2", "labels": ["x"]})
    assert patched["template"]["config"] == {"description": "a2", "labels": ["x"]}

    put = admin.request("PUT", "/api/v1/templates/crud-b",
                        {"name": "crud-b", "config": {"description": "b2"}, "workspaceId": 1})
    assert put["template"]["config"] == {"description": "b2"}
    upserted = admin.request("PUT", "/api/v1/templates/crud-c", {"config": {"description": "c"}})
    assert upserted["template"] == {"name": "crud-c", "config": {"description": "c"}, "workspaceId": 1}

    renamed = admin.request("PATCH", "/api/v1/template/rename", {"oldName": "crud-c", "newName": "crud-d"})
    assert renamed["template"]["name"] == "crud-d"
    assert _status(admin.get, "/api/v1/templates/crud-c")[0] == 404
    assert _status(admin.request, "PATCH", "/api/v1/template/rename",
                   {"oldName": "crud-d", "newName": "crud-a"})[0] == 409

    for name in ("crud-a", "crud-b", "crud-d"):
        assert admin.request("DELETE", f"/api/v1/templates/{name}") == {}
    assert admin.get("/api/v1/templates?name=crud-")["templates"] == []
    status, message = _status(admin.request, "DELETE", "/api/v1/templates/crud-a")
    assert (status, message) == (404, "template crud-a not found")


@pytest.mark.parametrize(("body", "word"), [
    ({"config": [1, 2]}, "must be a YAML mapping"),
    ({"config": "description: x"}, "must be a YAML mapping"),
    ({"config": None}, "must be a YAML mapping"),
    ({}, "needs a config"),
    ({"config": {"template": "other"}}, "cannot use another template"),
    ({"config": {}, "workspaceId": "one"}, "workspaceId"),
    ({"name": "other", "config": {}}, "must agree"),
])
def test_bad_template_is_a_400_that_names_the_problem(admin: Client, body: dict, word: str) -> None:
    status, message = _status(admin.post, "/api/v1/templates/bad", body)
    assert status == 400 and word in message, message
    assert _status(admin.get, "/api/v1/templates/bad")[0] == 404


def test_bad_config_on_patch_is_a_400_and_keeps_the_old_one(admin: Client) -> None:
    _put_new(admin, "patch-bad", {"description": "kept"})
    for raw in (b"[1]", b"\"text\"", b"{not json"):
        status, _ = _status(admin.request, "PATCH", "/api/v1/templates/patch-bad", raw=raw)
        assert status == 400
    assert admin.get("/api/v1/templates/patch-bad")["template"]["config"] == {"description": "kept"}


def test_duplicate_name_is_a_409(admin: Client) -> None:
    _put_new(admin, "dup", {"description": "first"})
    status, message = _status(_put_new, admin, "dup", {"description": "second"})
    assert status == 409 and "already exists" in message
    assert admin.get("/api/v1/templates/dup")["template"]["config"] == {"description": "first"}


def test_unknown_workspace_is_a_404(admin: Client) -> None:
    status, message = _status(_put_new, admin, "nowhere", {}, ws=4242)
    assert status == 404 and "workspace 4242" in message


def test_experiment_stores_the_merged_config_and_later_edits_do_not_change_it(admin: Client) -> None:
    _put_new(admin, "exp-base", TEMPLATE)
    exp = create_experiment(admin, counter_config(), COUNTER, template="exp-base", activate=False)
    exp_id = exp["experiment"]["id"]
    for config in (exp["config"], admin.get(f"/api/v1/experiments/{exp_id}")["config"]):
        assert config["description"] == "from-template"
        assert config["max_restarts"] == 5
        assert config["data"] == {"source": "template", "shards": 2}
        assert config["bind_mounts"][0]["container_path"] == "/shared"
        variables = config["environment"]["environment_variables"]
        assert "FROM_TEMPLATE=1" in (variables if isinstance(variables, list) else variables["cpu"])
        assert config["hyperparameters"]["length"] == {"type": "const", "val": 20}  # the config's

    admin.request("PATCH", "/api/v1/templates/exp-base", {"description": "edited later"})
    assert admin.get(f"/api/v1/experiments/{exp_id}")["config"]["description"] == "from-template"
    admin.request("DELETE", "/api/v1/templates/exp-base")
    assert admin.get(f"/api/v1/experiments/{exp_id}")["config"]["data"]["source"] == "template"
    admin.post(f"/api/v1/experiments/{exp_id}/kill")


def test_experiment_with_a_missing_template_or_bad_yaml_is_refused(admin: Client) -> None:
    before = admin.get("/api/v1/experiments")["pagination"]["total"]
    status, message = _status(create_experiment, admin, counter_config(), COUNTER, template="nope")
    assert (status, message) == (404, "template nope not found")
    _put_new(admin, "for-bad-yaml", {"description": "x"})
    status, message = _status(create_experiment, admin, "name: [unclosed\n", COUNTER,
                              template="for-bad-yaml")
    assert status == 400 and "line" in message
    assert admin.get("/api/v1/experiments")["pagination"]["total"] == before


def test_command_launch_applies_template_name(admin: Client) -> None:
    _put_new(admin, "cmd-base", {"description": "cmd-from-template",
                                 "environment": {"environment_variables": ["TPL=1"]}})
    for key in ("templateName", "template_name"):  # notebooks send one, `det cmd run` the other
        body = {"config": {"entrypoint": ["true"], "resources": {"slots": 0}}, key: "cmd-base"}
        resp = admin.post("/api/v1/commands", body)
        assert resp["config"]["description"] == "cmd-from-template"
        assert resp["config"]["env"] == {"TPL": "1"}  # the variables the command runs with
        admin.post(f"/api/v1/commands/{resp['command']['id']}/kill")
    # notebooks, shells and TensorBoards share one launch-body parser
    nb = admin.post("/api/v1/notebooks", {"config": {"resources": {"slots": 0}}, "templateName": "cmd-base"})
    assert nb["config"]["description"] == "cmd-from-template"
    admin.post(f"/api/v1/notebooks/{nb['notebook']['id']}/kill")
    status, message = _status(admin.post, "/api/v1/notebooks", {"templateName": "missing"})
    assert (status, message) == (404, "template missing not found")


# -- permissions ---------------------------------------------------------------------------------


def _viewer(master: MasterProcess, admin: Client) -> Client:
    """A user who holds only Viewer on Uncategorized (skips while the routes are missing)."""
    from det_jupyter.services.access.authz import ROLE_IDS

    try:
        user = admin.post("/api/v1/users", {"user": {"username": "tpl-viewer", "active": True,
                                                     "admin": False}, "password": "Viewer-Pass1"})
    except ApiError as err:
        if err.status in (404, 405):
            pytest.skip("POST /api/v1/users is not served yet (being built); can't make a Viewer")
        raise
    uid = user["user"]["id"]

    def assignment(role: str) -> dict:
        return {"userRoleAssignments": [{"userId": uid, "roleAssignment": {
            "role": {"roleId": ROLE_IDS[role]}, "scopeWorkspaceId": 1}}]}

    try:
        admin.post("/api/v1/roles/add-assignments", assignment("Viewer"))
        for role in ("Editor", "EditorRestricted", "WorkspaceAdmin"):  # whatever default it got
            try:
                admin.post("/api/v1/roles/remove-assignments", assignment(role))
            except ApiError as err:
                if err.status != 404:
                    raise
    except ApiError as err:
        if err.status in (404, 405) and "no such route" in str(err.body):
            pytest.skip("POST /api/v1/roles/add-assignments is not served yet (being built)")
        raise
    return Client(master.url, master.login("tpl-viewer", "Viewer-Pass1"))


def test_viewer_sees_and_uses_templates_but_cannot_change_them(master: MasterProcess, admin: Client) -> None:
    _put_new(admin, "perm-base", {"description": "perm"})
    viewer = _viewer(master, admin)
    assert viewer.get("/api/v1/templates/perm-base")["template"]["config"] == {"description": "perm"}
    assert "perm-base" in [t["name"] for t in viewer.get("/api/v1/templates")["templates"]]
    for call in ((viewer.post, "/api/v1/templates/perm-new", {"config": {}}),
                 (viewer.request, "PATCH", "/api/v1/templates/perm-base", {"description": "x"}),
                 (viewer.request, "PUT", "/api/v1/templates/perm-base", {"config": {}}),
                 (viewer.request, "DELETE", "/api/v1/templates/perm-base"),
                 (viewer.request, "PATCH", "/api/v1/template/rename",
                  {"oldName": "perm-base", "newName": "perm-x"})):
        status, message = _status(*call)
        assert status == 403, (call, status, message)
    assert _status(admin.get, "/api/v1/templates/perm-new")[0] == 404
    assert admin.get("/api/v1/templates/perm-base")["template"]["config"] == {"description": "perm"}


def test_config_text_is_yaml_after_merge(admin: Client) -> None:
    """What the stock CLI reads back: ``config`` is the object, and it parses as YAML again."""
    _put_new(admin, "yaml-base", {"description": "y"})
    exp = create_experiment(admin, counter_config(), COUNTER, template="yaml-base", activate=False)
    assert yaml.safe_load(yaml.safe_dump(exp["config"]))["description"] == "y"
    admin.post(f"/api/v1/experiments/{exp['experiment']['id']}/kill")


# -- our CLI -------------------------------------------------------------------------------------

DET = Path(sys.executable).parent / "det"


def test_det_template_commands_and_e_create_template(master: MasterProcess, admin: Client,
                                                     tmp_path: Path) -> None:
    if not DET.exists():
        pytest.skip(f"{DET} is missing: run pip install -e . to install the det console script")
    env = {k: v for k, v in os.environ.items() if k not in ("DET_USER", "DET_PASS")}
    env.update(DET_MASTER=master.url, DET_JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"),
               DET_USER="admin", DET_PASS=ADMIN_PASSWORD)

    def det(*argv: str, ok: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([str(DET), *argv], env=env, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)
        assert (done.returncode == 0) == ok, f"det {' '.join(argv)}: {done.stdout}{done.stderr}"
        assert "Traceback" not in done.stderr
        return done

    first, second, bad = tmp_path / "t1.yaml", tmp_path / "t2.yaml", tmp_path / "bad.yaml"
    first.write_text("description: cli-template\ndata:\n  from: cli\n")
    second.write_text("description: cli-template-v2\n")
    bad.write_text("- a\n- list\n")
    config = tmp_path / "exp.yaml"
    config.write_text(counter_config())

    assert "Created template cli-tpl" in det("template", "create", "cli-tpl", str(first)).stdout
    assert "already exists" in det("tpl", "create", "cli-tpl", str(first), ok=False).stderr
    assert "YAML mapping" in det("template", "create", "cli-bad", str(bad), ok=False).stderr
    listed = det("template", "list").stdout
    assert "cli-tpl" in listed and "cli-bad" not in listed
    assert "from: cli" in det("template", "list", "-d").stdout
    assert yaml.safe_load(det("template", "describe", "cli-tpl").stdout) == {
        "description": "cli-template", "data": {"from": "cli"}}

    out = det("e", "create", str(config), str(COUNTER), "--paused", "--template", "cli-tpl").stdout
    exp_id = int(out.split("Created experiment ")[1].split()[0])
    stored = admin.get(f"/api/v1/experiments/{exp_id}")["config"]
    assert (stored["description"], stored["data"]) == ("cli-template", {"from": "cli"})

    assert "Updated template" in det("template", "set-value", "config", "cli-tpl", str(second)).stdout
    assert yaml.safe_load(det("template", "describe", "cli-tpl").stdout) == {
        "description": "cli-template-v2"}
    assert admin.get(f"/api/v1/experiments/{exp_id}")["config"]["description"] == "cli-template"
    assert "Removed template cli-tpl" in det("template", "rm", "cli-tpl").stdout
    assert "not found" in det("template", "describe", "cli-tpl", ok=False).stderr
    admin.post(f"/api/v1/experiments/{exp_id}/kill")
