"""The OpenAPI document is built from the route table: every verb of every route is in it,
and every one declares who may call it (R3: a route without a declaration fails here)."""

from __future__ import annotations

import re

import pytest

from det_jupyter.server_ext._openapi import VERBS, _verbs, build, path_template
from det_jupyter.server_ext.routes import ROUTES

DOC = build(ROUTES)


def _operations() -> list[tuple[str, str, dict]]:
    return [(path, verb, op) for path, item in DOC["paths"].items()
            for verb, op in item.items() if verb in VERBS]


def test_every_verb_of_every_route_is_documented() -> None:
    documented = {(p, v) for p, v, _ in _operations()}
    missing = []
    for pattern, handler in ROUTES:
        for verb in _verbs(handler):
            path, _ = path_template(pattern, [])
            if ".*" in path and "{" not in path:
                continue
            # compare with argument names erased
            if not any(re.sub(r"\{[^}]+\}", "{}", p) == re.sub(r"\{[^}]+\}", "{}", path) and v == verb
                       for p, v in documented):
                missing.append(f"{verb.upper()} {pattern}")
    assert not missing, missing


@pytest.mark.parametrize("path,verb,op", _operations(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_operation_declares_who_may_call_it(path: str, verb: str, op: dict) -> None:
    assert op.get("x-det-public") or op.get("x-det-permission"), \
        f"{verb.upper()} {path} declares no permission (set permissions = {{...}} on its handler)"


def test_only_the_allowlisted_routes_are_public() -> None:
    public = sorted(f"{v.upper()} {p}" for p, v, op in _operations() if op.get("x-det-public"))
    # login, master info (the stock CLI reads it before logging in) and a redirect
    assert public == ["GET /api/v1/master", "GET /info", "GET /proxy/{task_id}", "POST /api/v1/auth/login"]


def test_path_templates() -> None:
    path, params = path_template(r"/api/v1/experiments/([0-9]+)/(activate|pause)", ["exp_id", "verb"])
    assert path == "/api/v1/experiments/{exp_id}/{verb}"
    assert params == [
        {"name": "exp_id", "in": "path", "required": True,
         "schema": {"type": "integer", "minimum": 0, "maximum": 2**62}},
        {"name": "verb", "in": "path", "required": True,
         "schema": {"type": "string", "enum": ["activate", "pause"]}},
    ]
    assert path_template(r"/proxy/([^/]+)/(.*)", ["task_id", "path"])[0] == "/proxy/{task_id}/{path}"


def test_workspace_permissions_name_what_seeing_needs() -> None:
    op = DOC["paths"]["/api/v1/experiments/{exp_id}"]["patch"]
    assert op["x-det-permission"] == "UPDATE_EXPERIMENT_METADATA"
    assert op["x-det-view-permission"] == "VIEW_EXPERIMENT_METADATA"
    assert op["x-det-scope"] == "workspace"
