"""Roles and their assignments (``det rbac …``), in 0.38.1's shapes.

Assigning on a workspace needs ASSIGN_ROLES there (its WorkspaceAdmin, or a ClusterAdmin);
assigning on the cluster needs UPDATE_ROLES, which only ClusterAdmin holds. Every assignment
of a request is checked before any is written, so a refused request changes nothing.
"""

from __future__ import annotations

from typing import Any

from ..errors import Forbidden, InvalidRequest, NotFound
from ..services.access.authz import CLUSTER_ONLY, ROLE_BY_ID, ROLE_IDS, ROLES, Perm
from ..services.access.rbac import Assignment
from . import _serialize as ser
from ._api import api, array, integer, obj, service_checked
from ._base import DetHandler

_PAGE = obj(offset=integer(0), limit=integer(0))


def _assignment(who: str) -> dict[str, Any]:
    """A ``v1UserRoleAssignment`` / ``v1GroupRoleAssignment``: on a workspace
    (``scopeWorkspaceId``) a role that may be given there, else on the cluster one that may."""
    def scoped(on_ws: bool) -> dict[str, Any]:
        ids = sorted(ROLE_IDS[n] for n, (_, ws, cluster) in ROLES.items() if (ws if on_ws else cluster))
        scope = integer(0) if on_ws else {"type": "integer", "nullable": True, "enum": [None]}
        return {"type": "object", "required": ["roleAssignment"], "properties": {"roleAssignment": {
            "type": "object", "required": ["role", *(["scopeWorkspaceId"] if on_ws else [])],
            "properties": {"role": {"type": "object", "required": ["roleId"],
                                    "properties": {"roleId": {"type": "integer", "enum": ids}}},
                           "scopeWorkspaceId": scope}}}}
    return service_checked({"type": "object", "required": [who], "properties": {who: integer()},
                            "anyOf": [scoped(True), scoped(False)]})


def permission_json(p: Perm) -> dict[str, Any]:
    return {"id": f"PERMISSION_TYPE_{p.value}", "name": p.value.lower(),
            "scopeTypeMask": {"cluster": True, "workspace": p not in CLUSTER_ONLY}}


def role_json(name: str) -> dict[str, Any]:
    perms, on_ws, on_cluster = ROLES[name]
    return {"roleId": ROLE_IDS[name], "name": name,
            "permissions": [permission_json(p) for p in sorted(perms, key=lambda p: p.value)
                            if p is not Perm.AUTHENTICATED],
            "scopeTypeMask": {"cluster": on_cluster, "workspace": on_ws}}


def _assignment_json(a: Assignment) -> dict[str, Any]:
    return {"role": role_json(a.role), "scopeCluster": a.workspace_id is None,
            **({"scopeWorkspaceId": a.workspace_id} if a.workspace_id is not None else {})}


def with_assignments(assignments: list[Assignment], groups_of_user: bool = False) -> list[dict[str, Any]]:
    """``v1RoleWithAssignments``, one per role that appears in ``assignments``."""
    by_role: dict[str, dict[str, Any]] = {}
    for a in assignments:
        entry = by_role.setdefault(a.role, {"role": role_json(a.role), "userRoleAssignments": [],
                                            "groupRoleAssignments": []})
        if a.user_id is not None:
            entry["userRoleAssignments"].append({"userId": a.user_id, "roleAssignment": _assignment_json(a)})
        else:
            entry["groupRoleAssignments"].append({"groupId": a.group_id, "roleAssignment": _assignment_json(a)})
    return list(by_role.values())


def summaries(assignments: list[Assignment]) -> list[dict[str, Any]]:
    """``v1RoleAssignmentSummary``: per role, the workspaces and whether on the cluster."""
    out: dict[str, dict[str, Any]] = {}
    for a in assignments:
        s = out.setdefault(a.role, {"roleId": ROLE_IDS[a.role], "scopeCluster": False, "scopeWorkspaceIds": []})
        if a.workspace_id is None:
            s["scopeCluster"] = True
        else:
            s["scopeWorkspaceIds"].append(a.workspace_id)
    return list(out.values())


def _page(handler: DetHandler, names: list[str]) -> None:
    body = handler.body_json()
    offset, limit = body.get("offset") or 0, body.get("limit") or 0
    if not isinstance(offset, int) or not isinstance(limit, int) or offset < 0 or limit < 0:
        raise InvalidRequest("offset and limit must be integers >= 0")
    page = names[offset:offset + limit] if limit else names[offset:]
    handler.send({"roles": [role_json(n) for n in page],
                  "pagination": ser.pagination(offset, limit, len(names), len(page))})


class ListRolesHandler(DetHandler):
    """``POST /api/v1/roles/search``: every role."""

    permissions = {"POST": Perm.AUTHENTICATED}

    @api(body=_PAGE)
    def post(self) -> None:
        _page(self, sorted(ROLES, key=ROLE_IDS.__getitem__))


class AssignableRolesHandler(DetHandler):
    """``POST /api/v1/roles/search/by-assignability``: roles that may be given on a
    workspace (``workspaceId`` set) or on the cluster."""

    permissions = {"POST": Perm.AUTHENTICATED}

    @api(body=obj(workspaceId=integer(), **_PAGE["properties"]))
    def post(self) -> None:
        on_ws = self.body_json().get("workspaceId") is not None
        _page(self, [n for n in sorted(ROLES, key=ROLE_IDS.__getitem__) if ROLES[n][1 if on_ws else 2]])


class RolesByIdHandler(DetHandler):
    """``POST /api/v1/roles/search/by-ids``: roles with their assignments (those the caller
    may see: all for an admin, else the ones on workspaces where it may assign roles)."""

    permissions = {"POST": Perm.AUTHENTICATED}

    @api(body=obj(roleIds=array(integer(), 100)))
    def post(self) -> None:
        ids = self.body_json().get("roleIds") or []
        unknown = [i for i in ids if i not in ROLE_BY_ID]
        if unknown:
            raise NotFound(f"no role with id {unknown[0]}; det rbac list-roles shows them")
        admin_ws = self.grants.workspaces_with(Perm.ASSIGN_ROLES)
        out = []
        for rid in ids:
            name = ROLE_BY_ID[rid]
            mine = [a for a in self.master.rbac.assignments() if a.role == name and (
                admin_ws is None or a.workspace_id in admin_ws)]
            entry = with_assignments(mine) or [{"role": role_json(name), "userRoleAssignments": [],
                                               "groupRoleAssignments": []}]
            out.extend(entry)
        self.send({"roles": out})


class UserRolesHandler(DetHandler):
    """``GET /api/v1/roles/search/by-user/{id}``: the caller's own, or anyone's for a user
    admin. Roles held through groups are listed as group assignments."""

    permissions = {"GET": Perm.AUTHENTICATED}

    @api()
    def get(self, user_id: str) -> None:
        uid = int(user_id)
        if uid != self.user.id and not self.grants.can(Perm.ADMINISTRATE_USER):
            raise NotFound(f"user {uid} not found")
        rbac = self.master.rbac
        found = rbac.assignments(user_id=uid)
        for gid in rbac.groups_of_user(uid):
            found.extend(rbac.assignments(group_id=gid))
        self.send({"roles": with_assignments(found)})


class GroupRolesHandler(DetHandler):
    permissions = {"GET": Perm.AUTHENTICATED}

    @api()
    def get(self, group_id: str) -> None:
        gid = int(group_id)
        rbac = self.master.rbac
        if not self.grants.can(Perm.ADMINISTRATE_USER) and gid not in rbac.groups_of_user(self.user.id):
            raise NotFound(f"group {gid} not found")
        found = rbac.assignments(group_id=gid)
        self.send({"roles": [role_json(n) for n in sorted({a.role for a in found})],
                   "assignments": summaries(found)})


class PermissionsSummaryHandler(DetHandler):
    """``GET /api/v1/permissions/summary`` (``det rbac my-permissions``)."""

    permissions = {"GET": Perm.AUTHENTICATED}

    @api()
    def get(self) -> None:
        rbac = self.master.rbac
        found = rbac.assignments(user_id=self.user.id)
        for gid in rbac.groups_of_user(self.user.id):
            found.extend(rbac.assignments(group_id=gid))
        self.send({"roles": [role_json(n) for n in sorted({a.role for a in found})],
                   "assignments": summaries(found)})


class WorkspaceRolesHandler(DetHandler):
    """``GET /api/v1/roles/workspace/{id}``: who holds which role there."""

    permissions = {"GET": Perm.VIEW_WORKSPACE}

    @api()
    def get(self, workspace_id: str) -> None:
        ws = int(workspace_id)
        self.authorize_workspace(ws)
        rbac = self.master.rbac
        found = rbac.assignments(workspace_id=ws, any_scope=False)
        users = {a.user_id for a in found if a.user_id is not None}
        groups = {a.group_id for a in found if a.group_id is not None}
        self.send({"assignments": with_assignments(found),
                   "usersAssignedDirectly": [ser.user(self.master.auth.user_by_id(u)) for u in sorted(users)],
                   "groups": [{"groupId": g, "name": rbac.group_name(g), "numMembers": 0}
                              for g in sorted(groups)]})


class AssignmentsHandler(DetHandler):
    """``POST /api/v1/roles/add-assignments`` and ``/remove-assignments``."""

    permissions = {"POST": Perm.ASSIGN_ROLES}

    @api(body={**obj(userRoleAssignments=array(_assignment("userId"), 1000),
                     groupRoleAssignments=array(_assignment("groupId"), 1000)),
               "anyOf": [service_checked({"required": [key], "properties": {key: {"minItems": 1}}})
                         for key in ("userRoleAssignments", "groupRoleAssignments")]},
         body_required=True, errors=(409,))
    def post(self, verb: str) -> None:
        body = self.body_json()
        wanted = []
        for key, who in (("userRoleAssignments", "userId"), ("groupRoleAssignments", "groupId")):
            items = body.get(key) or []
            if not isinstance(items, list):
                raise InvalidRequest(f"{key} must be a list")
            for i, item in enumerate(items):
                wanted.append(self._parse(item, who, f"{key}[{i}]"))
        if not wanted:
            raise InvalidRequest("give userRoleAssignments or groupRoleAssignments")
        for role, _, ws in wanted:  # every one checked before any is written
            self._may_assign(role, ws)
        rbac = self.master.rbac
        for role, target, ws in wanted:
            if verb == "add-assignments":
                rbac.assign(None, role, workspace_id=ws, **target)
            else:
                rbac.unassign(role, workspace_id=ws, **target)
        self.send({})

    def _parse(self, item: Any, who: str, where: str) -> tuple[str, dict[str, int], int | None]:
        if not isinstance(item, dict) or not isinstance(item.get(who), int):
            raise InvalidRequest(f"{where}.{who} must be an integer")
        ra = item.get("roleAssignment")
        role = ra.get("role") if isinstance(ra, dict) else None
        rid = role.get("roleId") if isinstance(role, dict) else None
        if rid not in ROLE_BY_ID:
            raise InvalidRequest(f"{where}.roleAssignment.role.roleId must be a role id "
                                 "(det rbac list-roles shows them)")
        assert isinstance(ra, dict)
        ws = ra.get("scopeWorkspaceId")
        if ws is not None and not isinstance(ws, int):
            raise InvalidRequest(f"{where}.roleAssignment.scopeWorkspaceId must be an integer")
        # No scopeWorkspaceId: the cluster (what the stock CLI sends without --workspace-name).
        return ROLE_BY_ID[rid], {"user_id" if who == "userId" else "group_id": item[who]}, ws

    def _may_assign(self, role: str, ws: int | None) -> None:
        if ws is None:
            if not self.grants.can(Perm.ASSIGN_CLUSTER_ROLES):
                raise Forbidden(f"assigning {role} on the cluster needs ClusterAdmin")
            self.mark_checked()
        else:
            self.authorize_workspace(ws, Perm.ASSIGN_ROLES)
