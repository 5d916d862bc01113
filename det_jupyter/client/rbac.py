"""Roles and assignments (``det rbac``): functions over a ``Determined`` session."""

from __future__ import annotations

from typing import Any

from ._errors import InvalidInput


def list_roles(d: Any) -> list[dict[str, Any]]:
    """Every role (``v1Role``: roleId, name, permissions, scopeTypeMask)."""
    return d._session.post("/api/v1/roles/search", {"limit": 0}).get("roles") or []


def role_id(d: Any, name: str) -> int:
    for r in list_roles(d):
        if r["name"] == name:
            return int(r["roleId"])
    names = ", ".join(r["name"] for r in list_roles(d))
    raise InvalidInput(f"no role named {name!r}; roles are {names}")


def describe_role(d: Any, name: str) -> dict[str, Any]:
    roles = d._session.post("/api/v1/roles/search/by-ids", {"roleIds": [role_id(d, name)]})["roles"]
    return roles[0]


def my_permissions(d: Any) -> dict[str, Any]:
    return d._session.get("/api/v1/permissions/summary")


def user_roles(d: Any, user_id: int) -> list[dict[str, Any]]:
    return d._session.get(f"/api/v1/roles/search/by-user/{user_id}").get("roles") or []


def group_roles(d: Any, group_id: int) -> dict[str, Any]:
    return d._session.get(f"/api/v1/roles/search/by-group/{group_id}")


def change_assignment(d: Any, add: bool, role: str, *, user_id: int | None = None,
                      group_id: int | None = None, workspace_id: int | None = None) -> None:
    """Give (``add``) or take back ``role`` from a user or a group, on a workspace or (no
    ``workspace_id``) the cluster."""
    ra: dict[str, Any] = {"role": {"roleId": role_id(d, role)}}
    if workspace_id is not None:
        ra["scopeWorkspaceId"] = workspace_id
    body: dict[str, Any] = (
        {"userRoleAssignments": [{"userId": user_id, "roleAssignment": ra}]} if user_id is not None
        else {"groupRoleAssignments": [{"groupId": group_id, "roleAssignment": ra}]})
    d._session.post(f"/api/v1/roles/{'add' if add else 'remove'}-assignments", body)
