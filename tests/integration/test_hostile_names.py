"""Hostile names on a real master: NUL, a bidi override, '/', '..', a lone surrogate and an
over-long name are refused with a 400 that names the problem, for every kind of name —
workspaces, projects, models, templates, labels (model and experiment), users, groups — on
create and on rename, and nothing stored changes."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests._master import ApiError, Client, MasterProcess
from tests.integration._exp import submit_counter

PASSWORD = "Hostile-Passw0rd"

# (id, the name, what the 400's message must say). NUL and lone surrogates in a JSON body are
# refused by the request's JSON layer before any service sees them (its message names the
# field and U+0000); the services' own check (tests/unit/test_names.py) is the second line.
HOSTILE = [
    ("nul", "a\0b", "U+0000"),
    ("bidi-override", "gpj.\u202eexe", "U+202E"),
    ("slash", "a/b", "'/'"),
    ("dot-dot", "..", "'..'"),
    ("too-long", "x" * 600, "at most"),
    ("lone-surrogate", "lone\ud800", None),  # the JSON layer may refuse it first, in its own words
]


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory):
    """One master for the module: every test compares its own before/after lists."""
    m = MasterProcess(tmp_path_factory.mktemp("hostile-names")).start()
    yield m
    m.stop()


@pytest.fixture(scope="module")
def admin(master: MasterProcess) -> Client:
    return master.admin()


@dataclass(frozen=True)
class Kind:
    """How to create, list and rename one kind of named thing over the REST API."""

    name: str
    create: Callable[[Client, str], Any]
    names: Callable[[Client], list[Any]]
    # Rename the object ``existing`` (what setup returned) to the name; None: no rename verb.
    rename: Callable[[Client, Any, str], Any] | None
    setup: Callable[[Client], Any]  # makes the object renamed; returns its handle


def _quote(name: str) -> str:
    """A name for a URL path segment: every reserved byte, and the dots of '.' and '..'."""
    return urllib.parse.quote(name, safe="", errors="surrogatepass").replace(".", "%2E")


def _ws(c: Client) -> int:
    return c.post("/api/v1/workspaces", {"name": "hostile-home"})["workspace"]["id"]


def _home(c: Client) -> int:
    found = c.get("/api/v1/workspaces?name=hostile-home")["workspaces"]
    return found[0]["id"] if found else _ws(c)


def _experiment(c: Client) -> int:
    exps = [e for e in c.get("/api/v1/experiments")["experiments"] if e["name"] == "counter"]
    return exps[0]["id"] if exps else submit_counter(c)


KINDS = [
    Kind("workspace",
         create=lambda c, n: c.post("/api/v1/workspaces", {"name": n}),
         names=lambda c: sorted(w["name"] for w in c.get("/api/v1/workspaces")["workspaces"]),
         rename=lambda c, wid, n: c.request("PATCH", f"/api/v1/workspaces/{wid}", {"name": n}),
         setup=lambda c: c.post("/api/v1/workspaces", {"name": "ws-keep"})["workspace"]["id"]),
    Kind("project",
         create=lambda c, n: c.post(f"/api/v1/workspaces/{_home(c)}/projects", {"name": n}),
         names=lambda c: sorted(p["name"] for p in
                                c.get(f"/api/v1/workspaces/{_home(c)}/projects")["projects"]),
         rename=lambda c, pid, n: c.request("PATCH", f"/api/v1/projects/{pid}", {"name": n}),
         setup=lambda c: c.post(f"/api/v1/workspaces/{_home(c)}/projects",
                                {"name": "project-keep"})["project"]["id"]),
    Kind("model",
         create=lambda c, n: c.post("/api/v1/models", {"name": n}),
         names=lambda c: sorted(m["name"] for m in c.get("/api/v1/models")["models"]),
         rename=lambda c, m, n: c.request("PATCH", f"/api/v1/models/{m}", {"name": n}),
         setup=lambda c: c.post("/api/v1/models", {"name": "model-keep"})["model"]["id"]),
    Kind("template",
         create=lambda c, n: c.post(f"/api/v1/templates/{_quote(n)}", {"config": {"description": "t"}}),
         names=lambda c: sorted(t["name"] for t in c.get("/api/v1/templates")["templates"]),
         rename=lambda c, old, n: c.request("PATCH", "/api/v1/template/rename",
                                            {"oldName": old, "newName": n}),
         setup=lambda c: c.post("/api/v1/templates/template-keep",
                                {"config": {"description": "t"}})["template"]["name"]),
    Kind("model label",
         create=lambda c, n: c.post("/api/v1/models", {"name": "labelled", "labels": ["ok", n]}),
         names=lambda c: (c.get("/api/v1/model/labels")["labels"],
                          sorted(m["name"] for m in c.get("/api/v1/models")["models"])),
         rename=lambda c, m, n: c.request("PATCH", f"/api/v1/models/{m}", {"labels": ["keep", n]}),
         setup=lambda c: c.post("/api/v1/models", {"name": "label-keep", "labels": ["keep"]})["model"]["id"]),
    Kind("experiment label",
         create=lambda c, n: c.request("PATCH", f"/api/v1/experiments/{_experiment(c)}",
                                       {"labels": ["ok", n]}),
         names=lambda c: c.get(f"/api/v1/experiments/{_experiment(c)}")["experiment"].get("labels"),
         rename=None,  # a PATCH of the labels is the only way to set them: "create" covers it
         setup=_experiment),
    Kind("user",
         create=lambda c, n: c.post("/api/v1/users", {"user": {"username": n, "active": True},
                                                      "password": PASSWORD}),
         names=lambda c: sorted(u["username"] for u in c.get("/api/v1/users")["users"]),
         rename=lambda c, uid, n: c.request("PATCH", f"/api/v1/users/{uid}", {"username": n}),
         setup=lambda c: c.post("/api/v1/users", {"user": {"username": "user-keep", "active": True},
                                                  "password": PASSWORD})["user"]["id"]),
    Kind("group",
         create=lambda c, n: c.post("/api/v1/groups", {"name": n, "addUsers": []}),
         names=lambda c: sorted(g["group"]["name"] for g in
                                c.post("/api/v1/groups/search", {})["groups"]),
         rename=lambda c, gid, n: c.request("PUT", f"/api/v1/groups/{gid}", {"name": n}),
         setup=lambda c: c.post("/api/v1/groups", {"name": "group-keep", "addUsers": []})["group"]["groupId"]),
]


def _refused(call: Callable[[], Any], said: str | None) -> str:
    with pytest.raises(ApiError) as err:
        call()
    assert err.value.status == 400, err.value.body
    body = err.value.body
    message = body.get("message", "") if isinstance(body, dict) else str(body)
    assert "Traceback" not in message
    if said is not None:
        assert said in message, message
    return message


_MADE: dict[str, Any] = {}


def _existing(c: Client, kind: Kind) -> Any:
    """The object of ``kind`` this module renames (made once, by ``kind.setup``)."""
    if kind.name not in _MADE:
        _MADE[kind.name] = kind.setup(c)
    return _MADE[kind.name]


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
@pytest.mark.parametrize(("case", "bad", "said"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_creating_with_a_hostile_name_is_a_400_and_stores_nothing(
        admin: Client, kind: Kind, case: str, bad: str, said: str | None) -> None:
    _existing(admin, kind)  # so "nothing changed" compares a list that is not empty
    before = kind.names(admin)
    message = _refused(lambda: kind.create(admin, bad), said)
    if case not in ("nul", "lone-surrogate"):
        assert kind.name.split()[-1] in message  # the message says which kind of name
    assert kind.names(admin) == before


RENAMED = [k for k in KINDS if k.rename is not None]


@pytest.mark.parametrize("kind", RENAMED, ids=[k.name for k in RENAMED])
@pytest.mark.parametrize(("case", "bad", "said"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_renaming_to_a_hostile_name_is_a_400_and_keeps_the_old_name(
        admin: Client, kind: Kind, case: str, bad: str, said: str | None) -> None:
    existing = _existing(admin, kind)
    before = kind.names(admin)
    assert kind.rename is not None
    _refused(lambda: kind.rename(admin, existing, bad), said)  # type: ignore[misc]
    assert kind.names(admin) == before


def test_ordinary_names_of_every_script_and_markup_are_stored_as_given(admin: Client) -> None:
    for name in ("Équipe 3", "模型", "<svg onload=alert(1)>"):
        assert admin.post("/api/v1/workspaces", {"name": name})["workspace"]["name"] == name
        assert admin.post("/api/v1/models", {"name": name, "labels": [name]})["model"]["labels"] == [name]
        quoted = urllib.parse.quote(name, safe="")
        assert admin.post(f"/api/v1/templates/{quoted}", {"config": {}})["template"]["name"] == name
        assert admin.post("/api/v1/groups", {"name": name, "addUsers": []})["group"]["name"] == name
    user = admin.post("/api/v1/users", {"user": {"username": "Équipe", "active": True},
                                        "password": PASSWORD})["user"]
    assert user["username"] == "Équipe"


@pytest.mark.parametrize(("field", "value", "said"), [
    ("name", "run\u202eexe", "U+202E"), ("name", "a\x1b[31mred", "U+001B"), ("name", "x" * 600, "at most"),
    ("labels", ["ok", "a/b"], "'/'"), ("labels", ["gpj.\u202eexe"], "U+202E")],
    ids=["name-bidi", "name-escape", "name-long", "label-slash", "label-bidi"])
def test_an_experiment_config_with_a_hostile_name_or_label_is_a_400(
        admin: Client, field: str, value: object, said: str) -> None:
    """An experiment's name and labels come from its YAML config: the rules a rename applies
    hold at create too (and for validateOnly), and nothing is stored."""
    import yaml

    from tests.integration._exp import counter_config
    config = yaml.safe_load(counter_config())
    config[field] = value
    before = admin.get("/api/v1/experiments")["pagination"]["total"]
    for validate_only in (True, False):
        message = _refused(lambda v=validate_only: admin.post(
            "/api/v1/experiments", {"config": yaml.safe_dump(config), "modelDefinition": [],
                                    "validateOnly": v, "activate": False}), said)
        assert ("name" if field == "name" else "label") in message
    assert admin.get("/api/v1/experiments")["pagination"]["total"] == before


def test_a_template_stored_before_the_naming_rules_can_still_be_updated(master: MasterProcess,
                                                                         admin: Client) -> None:
    """PUT upserts: the rules apply to the name of a new template, not to one already stored
    (a name from before the rules, put in the store directly here)."""
    import json
    import sqlite3

    legacy = "legacy\u202eyaml"
    with sqlite3.connect(master.data_dir / "det.db") as db:
        db.execute("INSERT INTO templates (name, config, workspace_id) VALUES (?, ?, 1)",
                   (legacy, json.dumps({"description": "old"})))
    answer = admin.request("PUT", f"/api/v1/templates/{_quote(legacy)}", {"config": {"description": "new"}})
    assert answer["template"]["config"] == {"description": "new"}
    # a new template under such a name is still refused, and so is a name that cannot be stored
    _refused(lambda: admin.request("PUT", f"/api/v1/templates/{_quote('new' + chr(0x202E))}",
                                   {"config": {}}), "U+202E")
    _refused(lambda: admin.request("PUT", f"/api/v1/templates/{_quote('nul' + chr(0))}", {"config": {}}), "U+0000")
