"""``det rbac list-roles|describe-role|my-permissions|list-users-roles|list-groups-roles|
assign-role|unassign-role`` (the stock CLI's names and flags)."""

from __future__ import annotations

import argparse
from typing import Any

from det_jupyter.client import rbac as rbac

from ._table import cell, format_table
from .common import CommandError, connect, print_json


def _user_id(d: Any, username: str) -> int:
    return int(d._session.get(f"/api/v1/users/{username}/by-username")["user"]["id"])


def _group_id(d: Any, name: str) -> int:
    found = d._session.post("/api/v1/groups/search", {"name": name, "limit": 1}).get("groups") or []
    if not found:
        raise CommandError(f"no group named {name!r}; det user-group list shows them")
    return int(found[0]["group"]["groupId"])


def _workspace_id(d: Any, name: str | None) -> int | None:
    if name is None:
        return None
    for ws in d._session.get("/api/v1/workspaces", name=name).get("workspaces") or []:
        if ws["name"] == name:
            return int(ws["id"])
    raise CommandError(f"no workspace named {name!r} that you can see; det workspace list shows them")


def _workspace_names(d: Any) -> dict[int, str]:
    return {int(w["id"]): w["name"] for w in d._session.get("/api/v1/workspaces").get("workspaces") or []}


def list_roles(args: argparse.Namespace) -> int:
    roles = rbac.list_roles(connect(args))
    if args.json:
        print_json(roles)
        return 0
    rows = [[r["roleId"], r["name"], len(r["permissions"]),
             ", ".join(k for k, v in sorted(r["scopeTypeMask"].items()) if v)] for r in roles]
    print(format_table(["ID", "Name", "Permissions", "Assignable on"], rows))
    return 0


def describe_role(args: argparse.Namespace) -> int:
    d = connect(args)
    role = rbac.describe_role(d, args.role_name)
    if args.json:
        print_json(role)
        return 0
    print(f"Role {cell(role['role']['name'])} (id {role['role']['roleId']})")
    print(format_table(["Permission", "Cluster", "Workspace"], [
        [p["name"], p["scopeTypeMask"]["cluster"], p["scopeTypeMask"]["workspace"]]
        for p in role["role"]["permissions"]]))
    names = _workspace_names(d)
    rows = [["user", a["userId"], _scope(a["roleAssignment"], names)] for a in role["userRoleAssignments"]]
    rows += [["group", a["groupId"], _scope(a["roleAssignment"], names)] for a in role["groupRoleAssignments"]]
    if rows:
        print()
        print(format_table(["Assigned to", "ID", "Scope"], rows))
    return 0


def _scope(ra: dict[str, Any], names: dict[int, str]) -> str:
    ws = ra.get("scopeWorkspaceId")
    return "cluster" if ws is None else f"workspace {names.get(ws, ws)}"


def _summary_rows(summary: dict[str, Any], names: dict[int, str]) -> list[list[Any]]:
    by_id = {r["roleId"]: r["name"] for r in summary["roles"]}
    rows = []
    for a in summary["assignments"]:
        scopes = (["cluster"] if a.get("scopeCluster") else []) + [
            f"workspace {names.get(w, w)}" for w in a.get("scopeWorkspaceIds") or []]
        rows.append([by_id.get(a["roleId"], a["roleId"]), ", ".join(scopes)])
    return rows


def my_permissions(args: argparse.Namespace) -> int:
    d = connect(args)
    summary = rbac.my_permissions(d)
    if args.json:
        print_json(summary)
        return 0
    print(format_table(["Role", "Scope"], _summary_rows(summary, _workspace_names(d))))
    return 0


def list_users_roles(args: argparse.Namespace) -> int:
    d = connect(args)
    roles = rbac.user_roles(d, _user_id(d, args.username))
    if args.json:
        print_json(roles)
        return 0
    names = _workspace_names(d)
    rows = [[r["role"]["name"], "directly", _scope(a["roleAssignment"], names)]
            for r in roles for a in r["userRoleAssignments"]]
    rows += [[r["role"]["name"], f"group {a['groupId']}", _scope(a["roleAssignment"], names)]
             for r in roles for a in r["groupRoleAssignments"]]
    print(format_table(["Role", "Held", "Scope"], rows))
    return 0


def list_groups_roles(args: argparse.Namespace) -> int:
    d = connect(args)
    summary = rbac.group_roles(d, _group_id(d, args.group_name))
    if args.json:
        print_json(summary)
        return 0
    print(format_table(["Role", "Scope"], _summary_rows(summary, _workspace_names(d))))
    return 0


def _assign(args: argparse.Namespace, add: bool) -> int:
    if (args.username_to_assign is None) == (args.group_name_to_assign is None):
        raise CommandError("give exactly one of --username-to-assign or --group-name-to-assign")
    d = connect(args)
    ws = _workspace_id(d, args.workspace_name)
    if args.username_to_assign is not None:
        rbac.change_assignment(d, add, args.role_name, user_id=_user_id(d, args.username_to_assign),
                               workspace_id=ws)
        who = f"user {args.username_to_assign}"
    else:
        rbac.change_assignment(d, add, args.role_name, group_id=_group_id(d, args.group_name_to_assign),
                               workspace_id=ws)
        who = f"group {args.group_name_to_assign}"
    scope = f"workspace {args.workspace_name}" if ws is not None else "the cluster"
    print(f"{'Assigned' if add else 'Removed'} role {args.role_name} {'to' if add else 'from'} {who} on {scope}")
    return 0


def add_parsers(sub: Any) -> None:
    r = sub.add_parser("rbac", help="roles and who holds them")
    rsub = r.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    p = rsub.add_parser("list-roles", help="every role")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_roles)
    p = rsub.add_parser("describe-role", help="a role's permissions and who holds it")
    p.add_argument("role_name")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=describe_role)
    p = rsub.add_parser("my-permissions", help="your roles and where they hold")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=my_permissions)
    p = rsub.add_parser("list-users-roles", help="a user's roles")
    p.add_argument("username")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_users_roles)
    p = rsub.add_parser("list-groups-roles", help="a group's roles")
    p.add_argument("group_name")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_groups_roles)
    for verb, add in (("assign-role", True), ("unassign-role", False)):
        p = rsub.add_parser(verb, help=f"{'give' if add else 'take back'} a role, on a workspace or the cluster")
        p.add_argument("role_name")
        p.add_argument("-u", "--username-to-assign", default=None)
        p.add_argument("-g", "--group-name-to-assign", default=None)
        p.add_argument("-w", "--workspace-name", default=None,
                       help="the workspace (default: the whole cluster)")
        p.set_defaults(func=lambda a, _add=add: _assign(a, _add))
