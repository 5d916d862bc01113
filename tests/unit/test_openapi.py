"""The OpenAPI document is built from the route table: every verb of every route is in it,
and every one declares who may call it (R3: a route without a declaration fails here)."""

from __future__ import annotations

import asyncio
import json
import re

import jsonschema
import pytest
from tornado import httpclient, httpserver, netutil, web

from det_jupyter.server_ext._api import MAX_QUERY_BYTES, MAX_QUERY_FIELDS, Q, _draft4, spec_of
from det_jupyter.server_ext._base import DetHandler, NotFoundHandler, implemented_verbs
from det_jupyter.server_ext._openapi import VERBS, _groups, _verbs, build, path_template
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
    # login, master info (the stock CLI reads it before logging in), a redirect, and signing
    # in through JupyterHub (its start and its OAuth callback: the hub vouches for the user)
    assert public == ["GET /api/v1/master", "GET /det-jupyter/hub/login", "GET /det-jupyter/hub/oauth_callback",
                      "GET /info", "GET /proxy/{task_id}", "POST /api/v1/auth/login"]


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


# -- declarations: every operation says what it takes and answers (issue 25, part 5) ----------

def _det_operations() -> list[tuple[str, type, str]]:
    out = []
    for pattern, handler in ROUTES:
        if not (isinstance(handler, type) and issubclass(handler, DetHandler)) or handler is NotFoundHandler:
            continue
        out.extend((pattern, handler, verb) for verb in _verbs(handler))
    return out


def test_every_operation_of_every_det_route_is_declared() -> None:
    undeclared = [f"{verb.upper()} {pattern} ({handler.__name__}.{verb})"
                  for pattern, handler, verb in _det_operations() if not spec_of(handler, verb).declared]
    assert not undeclared, f"add @api(...) to: {undeclared}"
    assert len(_det_operations()) >= 130


def test_the_document_is_valid_openapi_3_0() -> None:
    definitions = pytest.importorskip("schemathesis.specs.openapi.definitions",
                                      reason="the OpenAPI 3.0 meta-schema ships with schemathesis (test extra)")
    jsonschema.Draft4Validator(definitions.OPENAPI_30).validate(json.loads(json.dumps(DOC)))


def _refs(node: object) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "$ref" and isinstance(v, str)] + \
            [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_every_reference_resolves_and_every_operation_id_is_unique() -> None:
    schemas = DOC["components"]["schemas"]
    missing = {r for r in _refs(DOC) if r.removeprefix("#/components/schemas/") not in schemas}
    assert not missing
    ids = [op["operationId"] for _, _, op in _operations()]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("pattern,handler,verb", _det_operations(),
                         ids=lambda x: x.__name__ if isinstance(x, type) else str(x))
def test_each_declaration_is_a_usable_schema(pattern: str, handler: type, verb: str) -> None:
    spec = spec_of(handler, verb)
    if spec.body is not None:
        jsonschema.Draft4Validator.check_schema(_draft4(spec.body))
    for q in spec.query:
        jsonschema.Draft4Validator.check_schema(q.schema())
    if spec.body is not None and verb == "get":
        pytest.fail(f"GET {pattern} declares a request body")


def test_every_documented_error_has_the_error_body() -> None:
    for path, verb, op in _operations():
        if op.get("x-det-websocket") or op.get("x-det-permission") in ("AGENT_TOKEN", "JUPYTER_SERVER_USER"):
            continue
        for code, resp in op["responses"].items():
            if code.startswith(("4", "5")):
                schema = resp["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/Error"}, f"{verb} {path} {code}"
        if not op.get("x-det-public"):
            assert {"400", "401", "403", "404"} <= set(op["responses"]), f"{verb} {path}"


def _sample_path(pattern: str) -> str:
    """A concrete path for a route pattern: ids 1, names ``x``, the first of an alternation."""
    out, last = [], 0
    for a, b in _groups(pattern):
        body = pattern[a + 1:b - 1]
        sample = "1" if "0-9" in body or "\\d" in body else (body.split("|")[0] if "|" in body else "x")
        out.append(pattern[last:a] + sample)
        last = b
    return "".join(out) + pattern[last:]


def test_a_verb_a_route_lacks_is_a_405_naming_what_it_allows() -> None:
    """Before any credentials are looked at: a method a route does not implement is a 405 with
    ``Allow`` (HEAD and OPTIONS included), and a JSON error body."""
    app = web.Application([(p, h) for p, h in ROUTES
                           if isinstance(h, type) and issubclass(h, DetHandler) and h is not NotFoundHandler])
    checked: list[str] = []

    async def main() -> None:
        sockets = netutil.bind_sockets(0, "127.0.0.1")
        server = httpserver.HTTPServer(app)
        server.add_sockets(sockets)
        base = f"http://127.0.0.1:{sockets[0].getsockname()[1]}"
        client = httpclient.AsyncHTTPClient(force_instance=True)
        try:
            for pattern, handler in [(r.matcher.regex.pattern, r.target) for r in app.wildcard_router.rules]:
                allowed = implemented_verbs(handler)
                for method in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"):
                    if method.lower() in allowed:
                        continue
                    body = b"{}" if method in ("POST", "PUT", "PATCH") else None
                    resp = await client.fetch(base + _sample_path(pattern.rstrip("$")), method=method,
                                              body=body, raise_error=False, allow_nonstandard_methods=True)
                    where = f"{method} {pattern}"
                    assert resp.code == 405, (where, resp.code, resp.body[:200])
                    assert resp.headers.get("Allow") == ", ".join(v.upper() for v in allowed), where
                    if method != "HEAD":
                        assert json.loads(resp.body)["code"] == 405, where
                    checked.append(where)
        finally:
            client.close()
            server.stop()

    asyncio.run(main())
    assert len(checked) > 400


@pytest.mark.parametrize("pattern,handler,verb", _det_operations(),
                         ids=lambda x: x.__name__ if isinstance(x, type) else str(x))
def test_no_declaration_allows_more_query_fields_than_tornado_parses(pattern: str, handler: type,
                                                                      verb: str) -> None:
    """Past ``MAX_QUERY_FIELDS`` tornado answers a bare 400 before the handler: a request the
    document allows must stay under it (with room for a few unknown parameters)."""
    query = spec_of(handler, verb).query
    fields = sum(q.most for q in query)
    assert fields <= MAX_QUERY_FIELDS - 10, f"{verb.upper()} {pattern} allows {fields} query fields"
    # ...nor a longer query string than tornado reads (64 KiB with the request line and headers)
    longest = sum(q.most * (len(q.name) + 2 + _longest_value(q)) for q in query)
    assert longest <= MAX_QUERY_BYTES, f"{verb.upper()} {pattern} allows a {longest}-byte query"


def _longest_value(q: Q) -> int:
    """A value's longest percent-encoded form: 12 bytes a character (4 UTF-8 bytes, %XX each)."""
    if q.enum:
        return max(map(len, q.enum))
    return {"integer": 21, "boolean": 5}.get(q.type, 12 * q.max_length)
