"""The OpenAPI document of every route we serve, built from the route table itself.

Paths come from the table's patterns (each capture group becomes a path parameter named after
the verb's argument), operations from the verbs each handler defines, and each operation's
security from the handler's declarations (``public``, ``permissions``, ``allow_task``), so
the document cannot drift from what is served. ``x-det-permission`` names the permission a
verb needs; the authorization matrix test walks this document.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from tornado import web, websocket

from .. import __version__
from ..services.access.authz import CLUSTER_ONLY, VIEW_OF, Perm
from ._api import COMMON, REASONS, api, spec_of
from ._base import DetHandler, implemented_verbs

VERBS = ("get", "post", "put", "patch", "delete")
ERROR_REF = {"$ref": "#/components/schemas/Error"}
ERROR_SCHEMA = {
    "type": "object", "required": ["error", "message", "code"],
    "properties": {
        "error": {"type": "object", "properties": {"error": {"type": "string"}, "message": {"type": "string"},
                                                    "code": {"type": "integer"}}},
        "message": {"type": "string"}, "code": {"type": "integer"}},
}


def _groups(pattern: str) -> list[tuple[int, int]]:
    """(start, end) of each top-level capture group of a route pattern."""
    out, depth, start = [], 0, 0
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "(":
            if depth == 0:
                start = i
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                out.append((start, i + 1))
        i += 1
    return out


def path_template(pattern: str, names: list[str]) -> tuple[str, list[dict[str, Any]]]:
    """``/api/v1/experiments/(\\d+)/(activate|pause)`` and the verb's argument names →
    ``/api/v1/experiments/{exp_id}/{verb}`` and its parameters."""
    params: list[dict[str, Any]] = []
    parts, last = [], 0
    for k, (a, b) in enumerate(_groups(pattern)):
        name = names[k] if k < len(names) else f"arg{k}"
        body = pattern[a + 1:b - 1]
        schema: dict[str, Any] = {"type": "string"}
        if body in (r"\d+", "[0-9]+"):
            schema = {"type": "integer", "minimum": 0, "maximum": 2**62}
        elif body == "-?[0-9]+":
            schema = {"type": "integer", "minimum": -(2**62), "maximum": 2**62}
        elif re.fullmatch(r"[A-Za-z_\-]+(\|[A-Za-z_\-]+)+", body):
            schema = {"type": "string", "enum": body.split("|")}
        elif body not in ("[^/]+", "(.*)", ".*"):
            schema = {"type": "string", "pattern": body}
        params.append({"name": name, "in": "path", "required": True, "schema": schema})
        parts.append(pattern[last:a] + "{" + name + "}")
        last = b
    parts.append(pattern[last:])
    return "".join(parts), params


def _verbs(handler: type) -> list[str]:
    if issubclass(handler, websocket.WebSocketHandler):
        base = websocket.WebSocketHandler
        return [v for v in VERBS if getattr(handler, v, None) is not getattr(base, v, None)]
    return [v for v in implemented_verbs(handler) if v in VERBS]


def _json_response(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"description": description}
    if schema is not None:
        out["content"] = {"application/json": {"schema": schema}}
    return out


def _declared(handler: type, verb: str, op: dict[str, Any], *, authenticated: bool) -> None:
    """Parameters, request body and statuses, from the verb's ``@api`` declaration."""
    spec = spec_of(handler, verb)
    params = [{"name": name, "in": "path", "required": True, "schema": schema}
              for name, schema in (spec.path or {}).items()]
    # A single integer's or boolean's empty value (``?limit=``) reads as not given.
    params += [{"name": q.name, "in": "query", "required": q.required, "schema": q.schema(),
                **({"allowEmptyValue": True} if q.type != "string" and not (q.required or q.many) else {}),
                **({"style": "form", "explode": True} if q.many else {}),
                **({"description": q.description} if q.description else {})}
               for q in spec.query]
    if params:
        op["parameters"] = params
    if spec.body is not None:
        op["requestBody"] = {"required": spec.body_required,
                             "content": {"application/json": {"schema": spec.body}}}
    codes = set(COMMON) if authenticated else {400, 404}
    codes |= set(spec.errors)
    if spec.body is not None:
        codes.add(413)
    op["responses"] = {str(spec.ok): {"description": "success"}}
    for code in sorted(codes):
        op["responses"][str(code)] = _json_response(REASONS.get(code, "error"), ERROR_REF)


def _arg_names(handler: type, verb: str) -> list[str]:
    fn = getattr(handler, verb)
    return [p for p in inspect.signature(fn).parameters if p != "self"][: 8]


def operation(handler: type, verb: str) -> dict[str, Any]:
    """One operation: summary, security and the permission it needs."""
    doc = inspect.getdoc(getattr(handler, verb)) or inspect.getdoc(handler) or ""
    op: dict[str, Any] = {"operationId": f"{handler.__name__}.{verb}", "summary": doc.split("\n")[0],
                          "responses": {"200": {"description": "success"}}}
    if getattr(handler, "agent_token_only", False):
        op["security"] = [{"agentToken": []}]
        op["x-det-permission"] = "AGENT_TOKEN"
        return op
    if getattr(handler, "jupyter_auth", False):
        op["security"] = [{"jupyterToken": []}]
        op["x-det-permission"] = "JUPYTER_SERVER_USER"
        return op
    if getattr(handler, "public", False):
        op["security"] = []
        op["x-det-public"] = True
        _declared(handler, verb, op, authenticated=False)
        return op
    perm: Perm | None = getattr(handler, "permissions", {}).get(verb.upper())
    op["security"] = [{"bearer": []}] + ([{"allocationToken": []}] if getattr(handler, "allow_task", False) else [])
    if perm is not None:
        op["x-det-permission"] = perm.value
        op["x-det-scope"] = "cluster" if perm in CLUSTER_ONLY or perm is Perm.AUTHENTICATED else "workspace"
        if perm in VIEW_OF:
            op["x-det-view-permission"] = VIEW_OF[perm].value
    _declared(handler, verb, op, authenticated=True)
    return op


def _hoist(doc: dict[str, Any]) -> dict[str, Any]:
    """Each titled schema (a name's or a password's rules: patterns of thousands of
    characters) once, in ``components.schemas``, and ``$ref`` to it where it is used."""
    found: dict[str, Any] = doc["components"]["schemas"]

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        title = node.get("title")
        if isinstance(title, str) and node.get("type") == "string" and "pattern" in node:
            key = title + ("Nullable" if node.get("nullable") else "")
            found.setdefault(key, node)
            if found[key] == node:
                return {"$ref": f"#/components/schemas/{key}"}
        return {k: walk(v) for k, v in node.items()}

    doc["paths"] = walk(doc["paths"])
    return doc


def build(routes: list[tuple[str, Any]]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for pattern, handler in routes:
        if not isinstance(handler, type) or not issubclass(handler, web.RequestHandler):
            continue
        for verb in _verbs(handler):
            path, params = path_template(pattern, _arg_names(handler, verb))
            if ".*" in path and not params:  # the catch-all 404 of /api/v1
                continue
            item = paths.setdefault(path, {})
            if params:
                item["parameters"] = params
            op = operation(handler, verb)
            if issubclass(handler, websocket.WebSocketHandler):
                op["x-det-websocket"] = True
            item[verb] = op
    return _hoist({
        "openapi": "3.0.3",
        "info": {"title": "det-jupyter master API", "version": __version__,
                 "description": "Determined 0.38.1's REST protocol as det-jupyter serves it. Every "
                                "request body, undeclared keys included, is refused (400) where an "
                                "integer does not fit in 64 bits, it nests more than 32 levels, or "
                                "a string holds NUL or a lone surrogate; a query string holds at "
                                "most 1000 fields."},
        "paths": paths,
        "components": {"securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"},
            "allocationToken": {"type": "apiKey", "in": "header", "name": "Grpc-Metadata-x-allocation-token"},
            "agentToken": {"type": "http", "scheme": "bearer"},
            "jupyterToken": {"type": "apiKey", "in": "header", "name": "Authorization"},
        }, "schemas": {"Error": ERROR_SCHEMA}},
    })


class OpenApiHandler(DetHandler):
    """``GET /api/v1/openapi.json``: this document (built once per process)."""

    permissions = {"GET": Perm.AUTHENTICATED}
    _doc: str | None = None

    @api()
    def get(self) -> None:
        if OpenApiHandler._doc is None:
            import json

            from .routes import ROUTES

            # Patterns spell out Unicode ranges: as UTF-8 they are a third of their \u escapes.
            OpenApiHandler._doc = json.dumps(build(ROUTES), separators=(",", ":"), ensure_ascii=False)
        self.send_text(OpenApiHandler._doc)
