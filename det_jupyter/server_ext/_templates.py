"""/api/v1/templates: config templates (``det template ...``), and applying one at submit.

Permissions are checked on the template's workspace: VIEW_TEMPLATES to see or use one,
CREATE_TEMPLATES on the workspace a new one goes to, UPDATE_TEMPLATES / DELETE_TEMPLATES to
change or remove one. A caller who may not see a template gets 404 for it and never sees it
in a list.
"""

from __future__ import annotations

from typing import Any

from .. import names as _names
from ..errors import InvalidRequest, NotFound
from ..services.access.authz import Perm
from ..services.experiments.templates import Template, check_name
from . import _serialize as ser
from ._api import ORDER_BY, Q, api, echo, ident, name, obj, service_checked, string
from ._base import DetHandler
from ._json import checked_json

DEFAULT_WORKSPACE = 1  # Uncategorized: where a template without a workspace goes, as in 0.38.1


# -- applying a template at submit ------------------------------------------------------------


def template_name(body: dict[str, Any], *keys: str) -> str | None:
    """The template a launch body names under the first of ``keys`` it has (None if none)."""
    for key in keys:
        name = body.get(key)
        if name in (None, ""):
            continue
        if not isinstance(name, str):
            raise InvalidRequest(f"{key} must be a template's name (a string), got {name!r}")
        return name
    return None


def expand_config(handler: DetHandler, name: str, config: object) -> dict[str, Any]:
    """``config`` (a task's config object) with template ``name`` merged in; the caller
    needs VIEW_TEMPLATES on the template (404 if it may not see it)."""
    if not isinstance(config, dict):
        raise InvalidRequest("config must be an object (the task's config) to apply a template to it")
    handler.authorize_template(name, Perm.VIEW_TEMPLATES)
    return handler.master.templates.expand(name, config)


def launch_template_name(body: dict[str, Any]) -> str | None:
    """A notebook/command/shell/TensorBoard launch body's template: ``templateName``, or
    ``template_name`` as the stock ``det cmd run``/``det shell start`` send it."""
    return template_name(body, "templateName", "template_name")


# -- the routes ---------------------------------------------------------------------------------


def _body_template(handler: DetHandler, name: str) -> tuple[object, int | None]:
    """A ``v1Template`` body: its config and workspace id (None when not given or 0)."""
    body = handler.body_json()
    other = body.get("name")
    if other not in (None, "", name):
        raise InvalidRequest(f"the body names template {other!r} but the URL names {name!r}; "
                             "they must agree")
    if "config" not in body:
        raise InvalidRequest("a template needs a config (an object: the settings it supplies)")
    ws = body.get("workspaceId")
    if ws is not None and (not isinstance(ws, int) or isinstance(ws, bool) or ws < 0):
        raise InvalidRequest(f"workspaceId must be a workspace's id (an integer), got {ws!r}")
    return body["config"], ws or None


#: A template's config: a mapping that names no template of its own (``check_template_config``).
TEMPLATE_CONFIG = service_checked({"type": "object", "not": {"required": ["template"]}})
_NAME = name(255)
#: ``v1Template``, checked by ``_body_template`` and the service (their messages name the field).
TEMPLATE = service_checked(obj(("config",), config=TEMPLATE_CONFIG, name=echo(string(), "name"),
                               workspaceId=ident()))


class TemplatesHandler(DetHandler):
    max_body = 4 * 1024 * 1024
    permissions = {"GET": Perm.VIEW_TEMPLATES}

    @api(query=[Q("offset", "integer", description="negative: from the end"), Q("limit", "integer", minimum=0),
                Q("orderBy", enum=ORDER_BY), Q("name"), Q("workspaceIds", "integer", many=True)])
    def get(self) -> None:
        offset = self.int_arg("offset", 0) or 0
        limit = self.int_arg("limit", 0) or 0
        ws_ids = [int(raw) for raw in self.get_query_arguments("workspaceIds") if raw]
        rows, total = self.master.templates.list(
            name=self.get_query_argument("name", None), workspace_ids=ws_ids,
            visible=self.visible_workspaces(), offset=offset, limit=limit,
            descending=self.get_query_argument("orderBy", "") == "ORDER_BY_DESC")
        start = max(total + offset, 0) if offset < 0 else offset
        self.send({"templates": [r.to_json() for r in rows],
                   "pagination": ser.pagination(start, limit, total, len(rows))})


class TemplateHandler(DetHandler):
    max_body = 4 * 1024 * 1024
    permissions = {"GET": Perm.VIEW_TEMPLATES, "POST": Perm.CREATE_TEMPLATES,
                   "PUT": Perm.CREATE_TEMPLATES, "PATCH": Perm.UPDATE_TEMPLATES,
                   "DELETE": Perm.DELETE_TEMPLATES}

    @api()
    def get(self, name: str) -> None:
        self.authorize_template(name)
        self._send(self.master.templates.get(name))

    @api(path={"name": _NAME}, body=TEMPLATE, body_required=True, errors=(409,))
    def post(self, name: str) -> None:
        """``v1Template`` → a new template (409 if the name is taken anywhere)."""
        check_name(name)
        config, ws = _body_template(self, name)
        ws = ws or DEFAULT_WORKSPACE
        self.authorize_workspace(ws)
        self._send(self.master.templates.create(name, config, ws))

    @api(path={"name": _NAME}, body=TEMPLATE, body_required=True, errors=(409,))
    def put(self, name: str) -> None:
        """Upsert: an existing template gets the body's config (and moves to its workspace
        when one is given); a missing one is created. The naming rules apply to a new name:
        a template stored under an older name (before the rules) can still be updated."""
        try:
            check_name(name)
            refused = None
        except InvalidRequest as exc:
            refused = exc
        config, ws = _body_template(self, name)
        templates = self.master.templates
        current = None
        if refused is None or _names.storable(name):
            try:
                current = templates.get(name)
            except NotFound:
                pass
        if current is None:
            if refused is not None:
                raise refused
            ws = ws or DEFAULT_WORKSPACE
            self.authorize_workspace(ws)
            self._send(templates.create(name, config, ws))
            return
        self.authorize_template(name, Perm.UPDATE_TEMPLATES)
        if ws is not None and ws != current.workspace_id:
            self.authorize_workspace(ws, Perm.CREATE_TEMPLATES)
        tpl = templates.set_config(name, config)
        if ws is not None and ws != current.workspace_id:
            tpl = templates.move(name, ws)
        self._send(tpl)

    @api(body=TEMPLATE_CONFIG, body_required=True)
    def patch(self, name: str) -> None:
        """``PatchTemplateConfig``: the body is the new config itself (an object)."""
        self.authorize_template(name)
        config = checked_json(bytes(self.request.body or b"null"))
        self.spec.check_body(config)
        self._send(self.master.templates.set_config(name, config))

    @api()
    def delete(self, name: str) -> None:
        self.authorize_template(name)
        self.master.templates.delete(name)
        self.send({})

    def _send(self, tpl: Template) -> None:
        self.send({"template": tpl.to_json()})


class TemplateRenameHandler(DetHandler):
    """``PATCH /api/v1/template/rename`` ``{oldName, newName}`` (``PatchTemplateName``)."""

    permissions = {"PATCH": Perm.UPDATE_TEMPLATES}

    @api(body=obj(("oldName", "newName"), oldName=string(min_length=1), newName=_NAME),
         body_required=True, errors=(409,))
    def patch(self) -> None:
        body = self.body_json()
        old, new = body["oldName"], body["newName"]
        self.authorize_template(old)
        new = check_name(new)
        self.send({"template": self.master.templates.rename(old, new).to_json()})
