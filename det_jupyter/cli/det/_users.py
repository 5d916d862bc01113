"""``det user …`` and ``det user-group …`` (the stock CLI's names and flags).

``det user login|logout|whoami`` are the session commands of ``cluster``; the rest administer
users. New passwords come from ``--password``, else a prompt (twice) on a terminal, else the
first line of stdin; the master checks its password policy on them.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from det_jupyter.client import accounts as acc

from . import cluster
from ._table import cell, format_table
from .common import CommandError, connect, print_json, short_time

USER_HEADERS = ["User ID", "Username", "Display Name", "Admin", "Active", "Modified"]


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "yes", "1", "t", "y"):
        return True
    if lowered in ("false", "no", "0", "f", "n"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _new_password(username: str, given: str | None) -> str:
    if given is not None:
        return given
    if sys.stdin.isatty():
        first = getpass.getpass(f"New password for user '{username}': ")
        if getpass.getpass("Confirm password: ") != first:
            raise CommandError("passwords do not match")
        return first
    line = sys.stdin.readline().rstrip("\r\n")
    if not line:
        raise CommandError("no password given: pass --password, or type it at the prompt, or "
                           "send it on stdin")
    return line


def _user_rows(users: list[dict[str, Any]]) -> list[list[Any]]:
    return [[u["id"], u["username"], u.get("displayName") or "", u.get("admin"), u.get("active"),
             short_time(u.get("modifiedAt"))] for u in users]


# -- det user -------------------------------------------------------------------------------


def user_list(args: argparse.Namespace) -> int:
    users = acc.list_users(connect(args), active=None if args.all else True)
    if args.json:
        print_json(users)
    else:
        print(format_table(USER_HEADERS, _user_rows(users)))
    return 0


def user_create(args: argparse.Namespace) -> int:
    d = connect(args)
    password = _new_password(args.username, args.password)
    user = acc.create_user(d, args.username, password, admin=args.admin,
                           display_name=args.display_name)
    print(f"Created user '{cell(user['username'])}' (id {user['id']}{', admin' if user['admin'] else ''})")
    return 0


def user_set_active(args: argparse.Namespace) -> int:
    active = args.subcommand == "activate"
    acc.patch_user(connect(args), args.username, active=active)
    print(f"User '{args.username}' {'activated' if active else 'deactivated'}")
    return 0


def user_change_password(args: argparse.Namespace) -> int:
    d = connect(args)
    target = args.target_user or d.whoami()["username"]
    acc.set_password(d, target, _new_password(target, args.password))
    print(f"Password of user '{target}' changed")
    return 0


def user_rename(args: argparse.Namespace) -> int:
    acc.patch_user(connect(args), args.target_user, username=args.new_username)
    print(f"User '{args.target_user}' renamed to '{args.new_username}'")
    return 0


def user_edit(args: argparse.Namespace) -> int:
    changes: dict[str, Any] = {}
    if args.display_name is not None:
        changes["displayName"] = args.display_name
    if args.username is not None:
        changes["username"] = args.username
    if args.active is not None:
        changes["active"] = args.active
    if args.remove_admin:
        if args.admin:
            raise CommandError("--admin and --remove-admin contradict each other; pass one")
        changes["admin"] = False
    elif args.admin is not None:
        changes["admin"] = args.admin
    if not changes:
        raise CommandError("no field given; see det user edit -h")
    acc.patch_user(connect(args), args.target_user, **changes)
    wire = {"displayName": "Display Name", "username": "Username", "active": "Active",
            "admin": "Admin"}
    print("Changes made to the following fields: " + ", ".join(wire[k] for k in changes))
    return 0


def user_link(args: argparse.Namespace) -> int:
    """``det user link-with-agent-user``: the user's tasks run as this uid/gid on agents
    (``PATCH /api/v1/users/{id}`` with ``agentUserGroup``, as the stock CLI sends it)."""
    d = connect(args)
    user_id = acc.get_user(d, args.det_username)["id"]
    link = {"agentUid": args.agent_uid, "agentGid": args.agent_gid,
            "agentUser": args.agent_user, "agentGroup": args.agent_group}
    user = d._session.request("PATCH", f"/api/v1/users/{user_id}", {"agentUserGroup": link})["user"]
    got = user.get("agentUserGroup") or {}
    names = "/".join(n for n in (got.get("agentUser"), got.get("agentGroup")) if n)
    print(f"User '{cell(user['username'])}' linked with agent uid {got.get('agentUid')}, gid "
          f"{got.get('agentGid')}{f' ({cell(names)})' if names else ''}")
    return 0


# -- det user-group ---------------------------------------------------------------------------


def group_create(args: argparse.Namespace) -> int:
    group = acc.create_group(connect(args), args.group_name, args.add_user)
    print(f"user group with name {cell(group['name'])} and ID {group['groupId']} created")
    if group["users"]:
        print(f"{cell([u['username'] for u in group['users']])} was added to the group")
    return 0


def group_list(args: argparse.Namespace) -> int:
    d = connect(args)
    user_id = acc.user_ids(d, [args.groups_user_belongs_to])[0] if args.groups_user_belongs_to else None
    groups = acc.search_groups(d, user_id=user_id, offset=args.offset, limit=args.limit)
    if args.json:
        print_json(groups)
    else:
        print(format_table(["Group ID", "Name", "Members"],
                           [[g["group"]["groupId"], g["group"]["name"], g["numMembers"]]
                            for g in groups]))
    return 0


def group_describe(args: argparse.Namespace) -> int:
    group = acc.get_group(connect(args), args.group_name)
    if args.json:
        print_json(group)
        return 0
    print(f"group ID {group['groupId']} group name {cell(group['name'])} with users added")
    print(format_table(USER_HEADERS, _user_rows(group["users"])))
    return 0


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise CommandError("give one or more user names, comma-separated")
    return names


def group_members(args: argparse.Namespace) -> int:
    names = _names(args.usernames)
    adding = args.subcommand == "add-user"
    group = acc.update_group(connect(args), args.group_name,
                             add=names if adding else (), remove=() if adding else names)
    verb = "added to" if adding else "removed from"
    print(f"{', '.join(names)} {verb} user group {cell(group['name'])} (ID {group['groupId']})")
    return 0


def group_rename(args: argparse.Namespace) -> int:
    group = acc.update_group(connect(args), args.old_group_name, new_name=args.new_group_name)
    print(f"user group with ID {group['groupId']} name changed from {args.old_group_name} "
          f"to {cell(group['name'])}")
    return 0


def group_delete(args: argparse.Namespace) -> int:
    if not args.yes:
        if not sys.stdin.isatty():
            raise CommandError("deleting a group drops its memberships and roles for good; "
                               "pass --yes to confirm")
        answer = input(f"Delete user group {args.group_name} and its memberships? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("Skipping group deletion.")
            return 0
    gid = acc.delete_group(connect(args), args.group_name)
    print(f"user group with name {args.group_name} and ID {gid} deleted")
    return 0


# -- parsers ------------------------------------------------------------------------------


def _user_parsers(sub: Any) -> None:
    u = sub.add_parser("user", aliases=["u"], help="log in and out; manage users")
    usub = u.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    p = usub.add_parser("login", help="log in (the password from DET_PASS, a prompt or stdin)")
    p.add_argument("username", nargs="?", help="user name (default: -u, else 'determined')")
    p.add_argument("--password", help="the password (prefer DET_PASS, a prompt or stdin)")
    p.set_defaults(func=cluster.login)
    usub.add_parser("logout", help="log out and forget the token").set_defaults(func=cluster.logout)
    usub.add_parser("whoami", help="the logged-in user").set_defaults(func=cluster.whoami)
    p = usub.add_parser("list", aliases=["ls"], help="users (active ones unless --all)")
    p.add_argument("--all", "-a", action="store_true", help="include deactivated users")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=user_list)
    p = usub.add_parser("create", help="create a user (needs ADMINISTRATE_USER)")
    p.add_argument("username")
    p.add_argument("--admin", action="store_true", help="make the user a ClusterAdmin")
    p.add_argument("--password", help="the password (default: a prompt, else stdin)")
    p.add_argument("--display-name", help="a human-friendly name")
    p.set_defaults(func=user_create)
    for action, text in (("activate", "let a user log in again"),
                         ("deactivate", "stop a user's sessions and tokens; their work stays")):
        p = usub.add_parser(action, help=text)
        p.add_argument("username")
        p.set_defaults(func=user_set_active)
    p = usub.add_parser("change-password", help="set a new password (yours, or as an admin anyone's)")
    p.add_argument("target_user", nargs="?", help="whose (default: yours)")
    p.add_argument("--password", help="the new password (default: a prompt, else stdin)")
    p.set_defaults(func=user_change_password)
    p = usub.add_parser("rename", help="change a user's name (det user edit NAME --username)")
    p.add_argument("target_user")
    p.add_argument("new_username")
    p.set_defaults(func=user_rename)
    p = usub.add_parser("edit", help="change a user's display name, name, active or admin flag")
    p.add_argument("target_user")
    p.add_argument("--display-name", help="new display name")
    p.add_argument("--username", help="new user name")
    p.add_argument("--active", type=_bool, metavar="(true|false)", help="activate or deactivate")
    p.add_argument("--admin", type=_bool, nargs="?", const=True, metavar="(true|false)",
                   help="grant (no value or true) or remove (false) admin")
    p.add_argument("--remove-admin", action="store_true", help="remove admin (same as --admin false)")
    p.set_defaults(func=user_edit)
    p = usub.add_parser("link-with-agent-user",
                        help="run a user's tasks as this uid/gid on agents (needs ADMINISTRATE_USER)")
    p.add_argument("det_username", help="the user whose tasks it is")
    p.add_argument("--agent-uid", type=int, required=True, help="UID on the agent to run tasks as")
    p.add_argument("--agent-gid", type=int, required=True, help="GID on the agent to run tasks as")
    p.add_argument("--agent-user", help="the user name of that UID on the agent (optional)")
    p.add_argument("--agent-group", help="the group name of that GID on the agent (optional)")
    p.set_defaults(func=user_link)


def _group_parsers(sub: Any) -> None:
    g = sub.add_parser("user-group", help="manage user groups")
    gsub = g.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    p = gsub.add_parser("create", help="create a user group")
    p.add_argument("group_name")
    p.add_argument("--add-user", action="append", default=[], metavar="USERNAME",
                   help="a member to add (repeatable)")
    p.set_defaults(func=group_create)
    p = gsub.add_parser("list", aliases=["ls"], help="user groups")
    p.add_argument("--groups-user-belongs-to", metavar="USERNAME", help="only this user's groups")
    p.add_argument("--limit", type=int, default=0, help="at most this many (0: all)")
    p.add_argument("--offset", type=int, default=0, help="skip this many")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=group_list)
    p = gsub.add_parser("describe", help="a user group and its members")
    p.add_argument("group_name")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=group_describe)
    for action, text in (("add-user", "add users to a group"),
                         ("remove-user", "remove users from a group")):
        p = gsub.add_parser(action, help=text)
        p.add_argument("group_name")
        p.add_argument("usernames", help="comma-separated user names")
        p.set_defaults(func=group_members)
    p = gsub.add_parser("change-name", help="rename a user group")
    p.add_argument("old_group_name")
    p.add_argument("new_group_name")
    p.set_defaults(func=group_rename)
    p = gsub.add_parser("delete", help="delete a user group (its memberships and roles go too)")
    p.add_argument("group_name")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=group_delete)


def add_parsers(sub: Any) -> None:
    _user_parsers(sub)
    _group_parsers(sub)
