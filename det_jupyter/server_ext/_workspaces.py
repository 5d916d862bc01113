"""/api/v1/workspaces and /api/v1/projects (``det workspace``, ``det project``)."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest
from ..services.access.authz import Perm
from ..services.workspaces.rows import ProjectRecord, WorkspaceRecord
from . import _serialize as ser
from ._api import ORDER_BY, Q, api, echo, ident, name, obj, service_checked, string, users
from ._base import DetHandler

_UNSPECIFIED = "WORKSPACE_STATE_UNSPECIFIED"
# Workspace settings of 0.38.1 that det-jupyter does not act on: refused rather than stored.
_UNSUPPORTED_WS = ("agentUserGroup", "checkpointStorageConfig", "defaultComputePool", "defaultAuxPool",
                   "defaultComputeResourcePool", "defaultAuxResourcePool", "clusterNamespaceMeta",
                   "clusterQuotaPairs")


def workspace_json(w: WorkspaceRecord) -> dict[str, Any]:
    """``v1Workspace``."""
    out: dict[str, Any] = {
        "id": w.id, "name": w.name, "archived": w.archived, "immutable": w.immutable,
        "state": _UNSPECIFIED, "numProjects": w.num_projects, "numExperiments": w.num_experiments,
        "pinned": w.pinned_at is not None, "userId": w.user_id, "username": w.username,
        "errorMessage": "",
    }
    if w.pinned_at is not None:
        out["pinnedAt"] = ser.ts(w.pinned_at)
    return out


def project_json(p: ProjectRecord) -> dict[str, Any]:
    """``v1Project``."""
    out: dict[str, Any] = {
        "id": p.id, "name": p.name, "key": p.key, "description": p.description,
        "workspaceId": p.workspace_id, "workspaceName": p.workspace_name, "archived": p.archived,
        "immutable": p.immutable, "state": _UNSPECIFIED,
        "notes": [{"name": n, "contents": c} for n, c in p.notes],
        "numExperiments": p.num_experiments, "numActiveExperiments": p.num_active_experiments,
        "numRuns": p.num_runs, "userId": p.user_id, "username": p.username, "errorMessage": "",
    }
    if p.last_experiment_started_at is not None:
        out["lastExperimentStartedAt"] = ser.ts(p.last_experiment_started_at)
    return out


_NAME = name(80, padded=True)
_KEY = service_checked({"type": "string", "pattern": "^[A-Za-z0-9]{1,5}$"})
#: Unsupported settings may only be left out, null or empty.
_EMPTY_ONLY = {"anyOf": [{"type": "object", "maxProperties": 0}, {"type": "string", "maxLength": 0}],
               "nullable": True, "description": "not supported by det-jupyter: leave it out"}
_WORKSPACE = dict(name=_NAME, **{k: _EMPTY_ONLY for k in _UNSUPPORTED_WS})
_NOTE = {"type": "object", "properties": {"name": string(), "contents": string(1024 * 1024)}}


def _lists(*extra: Q) -> list[Q]:
    """The query of the workspace and project lists (``_Lists._paging``) and ``extra``."""
    return [Q("offset", "integer", description="negative: from the end"), Q("limit", "integer"),
            Q("orderBy", enum=ORDER_BY), Q("sortBy", max_length=64), users(),
            Q("userIds", "integer", many=True), Q("archived", "boolean"), Q("name", max_length=128), *extra]


def _unsupported(body: dict[str, Any]) -> None:
    given = [k for k in _UNSUPPORTED_WS if body.get(k) not in (None, {}, "")]
    if given:
        raise InvalidRequest(f"workspace setting(s) {', '.join(given)} are not supported by det-jupyter; "
                             "set resources and checkpoint_storage in each experiment's config instead")


def _int_field(body: dict[str, Any], key: str) -> int:
    value = body.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidRequest(f"{key} must be an integer id")
    return value


class _Lists(DetHandler):
    """Query arguments shared by the workspace and project lists."""

    def _opt_bool(self, name: str) -> bool | None:
        raw = self.get_query_argument(name, None)
        return None if raw in (None, "") else self.bool_arg(name)

    def _user_ids(self) -> list[int]:
        return [int(raw) for raw in self.get_query_arguments("userIds") if raw]

    def _paging(self) -> dict[str, Any]:
        return {"sort": self.get_query_argument("sortBy", ""),
                "descending": self.get_query_argument("orderBy", "") == "ORDER_BY_DESC",
                "offset": self.int_arg("offset", 0) or 0, "limit": max(self.int_arg("limit", 0) or 0, 0),
                "users": self.get_query_arguments("users") or None, "user_ids": self._user_ids() or None,
                "archived": self._opt_bool("archived")}

    def _send_page(self, key: str, items: list[dict[str, Any]], total: int, paging: dict[str, Any]) -> None:
        offset = paging["offset"] if paging["offset"] >= 0 else max(total + paging["offset"], 0)
        self.send({key: items, "pagination": ser.pagination(offset, paging["limit"], total, len(items))})


class WorkspacesHandler(_Lists):
    permissions = {"GET": Perm.VIEW_WORKSPACE, "POST": Perm.CREATE_WORKSPACE}

    @api(query=_lists(Q("nameCaseSensitive", max_length=128), Q("pinned", "boolean")))
    def get(self) -> None:
        paging = self._paging()
        found, total = self.master.workspaces.list_workspaces(
            self.user.id, visible=self.visible_workspaces(), name=self.get_query_argument("name", None),
            exact_name=self.get_query_argument("nameCaseSensitive", None),
            pinned=self._opt_bool("pinned"), **paging)
        self._send_page("workspaces", [workspace_json(w) for w in found], total, paging)

    @api(body=obj(("name",), **_WORKSPACE), body_required=True, errors=(409,))
    def post(self) -> None:
        body = self.body_json()
        _unsupported(body)
        ws_id = self.master.workspaces.create_workspace(self.user.id, body.get("name"))
        # The stock CLI iterates namespaceBindings (Kubernetes only): always a mapping.
        self.send({"workspace": workspace_json(self.master.workspaces.get_workspace(ws_id, self.user.id)),
                   "namespaceBindings": {}})


class WorkspaceHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_WORKSPACE, "PATCH": Perm.UPDATE_WORKSPACE,
                   "DELETE": Perm.DELETE_WORKSPACE}

    @api()
    def get(self, ws_id: str) -> None:
        self.authorize_workspace(int(ws_id))
        self.send({"workspace": workspace_json(self.master.workspaces.get_workspace(int(ws_id), self.user.id))})

    @api(body=obj(**_WORKSPACE), errors=(409,))
    def patch(self, ws_id: str) -> None:
        wid = int(ws_id)
        self.authorize_workspace(wid)
        body = self.body_json()
        _unsupported(body)
        if body.get("name") is not None:
            self.master.workspaces.rename_workspace(wid, body["name"])
        self.send({"workspace": workspace_json(self.master.workspaces.get_workspace(wid, self.user.id)),
                   "namespaceBindings": {}})

    @api(errors=(409,))
    def delete(self, ws_id: str) -> None:
        self.authorize_workspace(int(ws_id))
        self.master.workspaces.delete_workspace(int(ws_id))
        self.send({"completed": True})


class WorkspaceArchiveHandler(DetHandler):
    permissions = {"POST": Perm.UPDATE_WORKSPACE}

    @api(errors=(409,))
    def post(self, ws_id: str, verb: str) -> None:
        self.authorize_workspace(int(ws_id))
        self.master.workspaces.set_workspace_archived(int(ws_id), verb == "archive")
        self.send({})


class WorkspacePinHandler(DetHandler):
    """Pins are the caller's own: seeing the workspace is enough."""

    permissions = {"POST": Perm.VIEW_WORKSPACE}

    @api()
    def post(self, ws_id: str, verb: str) -> None:
        self.authorize_workspace(int(ws_id))
        self.master.workspaces.set_pinned(int(ws_id), self.user.id, verb == "pin")
        self.send({})


class WorkspaceProjectsHandler(_Lists):
    permissions = {"GET": Perm.VIEW_PROJECT, "POST": Perm.CREATE_PROJECT}

    @api(query=_lists())
    def get(self, ws_id: str) -> None:
        wid = int(ws_id)
        if wid:  # 0: the projects of every workspace the caller sees
            self.authorize_workspace(wid)
        paging = self._paging()
        found, total = self.master.workspaces.list_projects(
            workspace_id=wid, visible=self.visible_workspaces(),
            name=self.get_query_argument("name", None), **paging)
        self._send_page("projects", [project_json(p) for p in found], total, paging)

    @api(body=obj(("name",), name=_NAME, description=string(), key=_KEY, workspaceId=echo(ident(), "ws_id")),
         body_required=True, errors=(409,))
    def post(self, ws_id: str) -> None:
        wid = int(ws_id)
        self.authorize_workspace(wid)
        body = self.body_json()
        if body.get("workspaceId") not in (None, wid):
            raise InvalidRequest(f"workspaceId {body['workspaceId']!r} differs from the workspace in the path ({wid})")
        pid = self.master.workspaces.create_project(self.user.id, wid, body.get("name"),
                                                    body.get("description"), body.get("key"))
        self.send({"project": project_json(self.master.workspaces.get_project(pid))})


class ProjectHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_PROJECT, "PATCH": Perm.UPDATE_PROJECT, "DELETE": Perm.DELETE_PROJECT}

    @api()
    def get(self, project_id: str) -> None:
        self.authorize_project(int(project_id))
        self.send({"project": project_json(self.master.workspaces.get_project(int(project_id)))})

    @api(body=obj(name=_NAME, description=string(), key=_KEY), errors=(409,))
    def patch(self, project_id: str) -> None:
        pid = int(project_id)
        self.authorize_project(pid)
        body = self.body_json()
        self.master.workspaces.patch_project(pid, name=body.get("name"), description=body.get("description"),
                                             key=body.get("key"))
        self.send({"project": project_json(self.master.workspaces.get_project(pid))})

    @api(errors=(409,))
    def delete(self, project_id: str) -> None:
        self.authorize_project(int(project_id))
        self.master.workspaces.delete_project(int(project_id))
        self.send({"completed": True})


class ProjectArchiveHandler(DetHandler):
    permissions = {"POST": Perm.UPDATE_PROJECT}

    @api(errors=(409,))
    def post(self, project_id: str, verb: str) -> None:
        self.authorize_project(int(project_id))
        self.master.workspaces.set_project_archived(int(project_id), verb == "archive")
        self.send({})


class ProjectNotesHandler(DetHandler):
    """POST adds one note (``v1Note``); PUT replaces them all (``{notes, projectId}``)."""

    permissions = {"POST": Perm.UPDATE_PROJECT, "PUT": Perm.UPDATE_PROJECT}

    @api(body={**_NOTE, "required": ["name", "contents"]}, body_required=True, errors=(409,))
    def post(self, project_id: str) -> None:
        self.authorize_project(int(project_id))
        notes = self.master.workspaces.set_notes(int(project_id), self.body_json(), append=True)
        self.send({"notes": notes})

    @api(body=obj(("notes",), notes={"type": "array", "items": _NOTE, "maxItems": 1000},
                  projectId=echo(ident(), "project_id")), body_required=True, errors=(409,))
    def put(self, project_id: str) -> None:
        self.authorize_project(int(project_id))
        notes = self.master.workspaces.set_notes(int(project_id), self.body_json().get("notes"), append=False)
        self.send({"notes": notes})


class ProjectMoveHandler(DetHandler):
    """``{destinationWorkspaceId}``: delete rights where it is, create rights where it goes."""

    permissions = {"POST": Perm.DELETE_PROJECT}

    @api(body=obj(("destinationWorkspaceId",), destinationWorkspaceId=ident(),
                  projectId=echo(ident(), "project_id")), body_required=True, errors=(409,))
    def post(self, project_id: str) -> None:
        pid = int(project_id)
        self.authorize_project(pid)
        dest = _int_field(self.body_json(), "destinationWorkspaceId")
        self.authorize_workspace(dest, Perm.CREATE_PROJECT)
        self.master.workspaces.move_project(pid, dest)
        self.send({})
