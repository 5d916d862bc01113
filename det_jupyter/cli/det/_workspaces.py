"""``det workspace …``, ``det project …`` and ``det experiment archive|unarchive|delete|move``.

Workspaces and projects are named as in Determined's CLI (``det project describe WS NAME``).
Deleting asks first (on a terminal) unless ``--yes``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._table import format_pairs, format_table
from .common import CommandError, connect, percent, print_json, short_time

WS_HEADERS = ["ID", "Name", "# Projects", "# Experiments", "Archived", "Owner"]
PROJECT_HEADERS = ["ID", "Key", "Name", "Workspace", "Description", "# Experiments",
                   "# Active Experiments", "Archived"]
EXP_HEADERS = ["ID", "Owner", "Name", "State", "Progress", "Start Time", "End Time", "Archived"]


def _ws_row(w: dict[str, Any]) -> list[Any]:
    return [w["id"], w["name"], w["numProjects"], w["numExperiments"], w["archived"], w["username"]]


def _project_row(p: dict[str, Any]) -> list[Any]:
    return [p["id"], p["key"], p["name"], p.get("workspaceName", ""), p.get("description", ""),
            p["numExperiments"], p["numActiveExperiments"], p["archived"]]


def _confirm(args: argparse.Namespace, what: str) -> bool:
    """``--yes``, or the user's yes on a terminal; a script without ``--yes`` is refused."""
    if args.yes:
        return True
    if not sys.stdin.isatty():
        raise CommandError(f"not deleting {what} without confirmation: pass --yes")
    answer = input(f"Deleting {what} also deletes everything in it, for good "
                   "(archive it to keep it). Proceed? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


# -- workspaces -----------------------------------------------------------------------------

def ws_create(args: argparse.Namespace) -> int:
    w = connect(args).create_workspace(args.name)
    print_json(w) if args.json else print(format_table(WS_HEADERS, [_ws_row(w)]))
    return 0


def ws_list(args: argparse.Namespace) -> int:
    found = connect(args).list_workspaces(archived=None if args.all else False)
    print_json(found) if args.json else print(format_table(WS_HEADERS, [_ws_row(w) for w in found]))
    return 0


def ws_describe(args: argparse.Namespace) -> int:
    client = connect(args)
    w = client.get_workspace(args.workspace_name)
    if args.json:
        print_json(w)
        return 0
    print(format_pairs([("ID", w["id"]), ("Name", w["name"]), ("Owner", w["username"]),
                        ("Archived", w["archived"]), ("Built in", w["immutable"]),
                        ("Projects", w["numProjects"]), ("Experiments", w["numExperiments"])]))
    return 0


def ws_edit(args: argparse.Namespace) -> int:
    client = connect(args)
    w = client.rename_workspace(client.get_workspace(args.workspace_name)["id"], args.name)
    print_json(w) if args.json else print(format_table(WS_HEADERS, [_ws_row(w)]))
    return 0


def ws_archive(args: argparse.Namespace) -> int:
    client = connect(args)
    client.archive_workspace(client.get_workspace(args.workspace_name)["id"], args.archive)
    print(f"Workspace {args.workspace_name} {'archived' if args.archive else 'unarchived'}")
    return 0


def ws_delete(args: argparse.Namespace) -> int:
    client = connect(args)
    w = client.get_workspace(args.workspace_name)
    if not _confirm(args, f"workspace {w['name']!r} (its {w['numProjects']} projects and "
                          f"{w['numExperiments']} experiments)"):
        print("Not deleted")
        return 1
    client.delete_workspace(w["id"])
    print(f"Workspace {w['name']} deleted")
    return 0


def ws_projects(args: argparse.Namespace) -> int:
    client = connect(args)
    found = client.list_projects(client.get_workspace(args.workspace_name)["id"])
    print_json(found) if args.json else print(format_table(PROJECT_HEADERS, [_project_row(p) for p in found]))
    return 0


# -- projects -------------------------------------------------------------------------------

def p_create(args: argparse.Namespace) -> int:
    client = connect(args)
    ws = client.get_workspace(args.workspace_name)
    p = client.create_project(ws["id"], args.name, description=args.description, key=args.key)
    print_json(p) if args.json else print(format_table(PROJECT_HEADERS, [_project_row(p)]))
    return 0


def p_list(args: argparse.Namespace) -> int:
    client = connect(args)
    ws_id = client.get_workspace(args.workspace_name)["id"] if args.workspace_name else 0
    found = client.list_projects(ws_id)
    print_json(found) if args.json else print(format_table(PROJECT_HEADERS, [_project_row(p) for p in found]))
    return 0


def p_describe(args: argparse.Namespace) -> int:
    client = connect(args)
    p = client.get_project(args.workspace_name, args.project_name)
    if args.json:
        print_json(p)
        return 0
    print(format_pairs([("ID", p["id"]), ("Key", p["key"]), ("Name", p["name"]),
                        ("Workspace", p.get("workspaceName", "")), ("Description", p.get("description", "")),
                        ("Owner", p["username"]), ("Archived", p["archived"]),
                        ("Experiments", p["numExperiments"]), ("Active experiments", p["numActiveExperiments"]),
                        ("Runs", p["numRuns"]), ("Notes", [n["name"] for n in p["notes"]])]))
    return 0


def p_edit(args: argparse.Namespace) -> int:
    client = connect(args)
    p = client.get_project(args.workspace_name, args.project_name)
    if args.new_name is None and args.description is None and args.key is None:
        raise CommandError("nothing to change: give --new-name, --description or --key")
    p = client.edit_project(p["id"], name=args.new_name, description=args.description, key=args.key)
    print_json(p) if args.json else print(format_table(PROJECT_HEADERS, [_project_row(p)]))
    return 0


def p_archive(args: argparse.Namespace) -> int:
    client = connect(args)
    client.archive_project(client.get_project(args.workspace_name, args.project_name)["id"], args.archive)
    print(f"Project {args.project_name} {'archived' if args.archive else 'unarchived'}")
    return 0


def p_delete(args: argparse.Namespace) -> int:
    client = connect(args)
    p = client.get_project(args.workspace_name, args.project_name)
    if not _confirm(args, f"project {p['name']!r} (its {p['numExperiments']} experiments)"):
        print("Not deleted")
        return 1
    client.delete_project(p["id"])
    print(f"Project {p['name']} deleted")
    return 0


def p_experiments(args: argparse.Namespace) -> int:
    client = connect(args)
    p = client.get_project(args.workspace_name, args.project_name)
    users = None if args.all else [client.username or client.whoami()["username"]]
    exps = client.project_experiments(p["id"], users=users, archived=None if args.all else False)
    if args.json:
        print_json([e.to_dict() for e in exps])
        return 0
    print(format_table(EXP_HEADERS, [[e.id, e.username, e.name, e.state, percent(e.progress),
                                      short_time(e.start_time), short_time(e.end_time),
                                      e.to_dict().get("archived")] for e in exps]))
    return 0


# -- experiments ----------------------------------------------------------------------------

def e_archive(args: argparse.Namespace) -> int:
    connect(args).archive_experiment(args.experiment_id, args.archive)
    print(f"{'Archived' if args.archive else 'Unarchived'} experiment {args.experiment_id}")
    return 0


def e_delete(args: argparse.Namespace) -> int:
    client = connect(args)
    if not _confirm(args, f"experiment {args.experiment_id} (its trials, metrics, logs and checkpoints)"):
        print("Not deleted")
        return 1
    client.delete_experiment(args.experiment_id)
    print(f"Experiment {args.experiment_id} deleted")
    return 0


def e_move(args: argparse.Namespace) -> int:
    client = connect(args)
    p = client.get_project(args.workspace_name, args.project_name)
    client.move_experiment(args.experiment_id, p["id"])
    print(f'Moved experiment {args.experiment_id} to project "{p["name"]}" (workspace "{p["workspaceName"]}")')
    return 0


def add_experiment_parsers(esub: Any) -> None:
    """``archive``, ``unarchive``, ``delete`` and ``move`` under ``det experiment``."""
    for name, archive in (("archive", True), ("unarchive", False)):
        p = esub.add_parser(name, help="archive an ended experiment (hidden from lists)" if archive
                            else "unarchive an experiment")
        p.add_argument("experiment_id", type=int)
        p.set_defaults(func=e_archive, archive=archive)
    p = esub.add_parser("delete", help="delete an ended experiment with its checkpoints, for good")
    p.add_argument("experiment_id", type=int)
    p.add_argument("--yes", action="store_true", help="do not ask")
    p.set_defaults(func=e_delete)
    p = esub.add_parser("move", help="move an experiment to another project")
    p.add_argument("experiment_id", type=int)
    p.add_argument("workspace_name", help="destination workspace")
    p.add_argument("project_name", help="destination project")
    p.set_defaults(func=e_move)


def _cmd(sub: Any, name: str, func: Any, help_: str, *positional: str, json: bool = False,
         **defaults: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help_)
    for arg in positional:
        p.add_argument(arg)
    if json:
        p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=func, **defaults)
    return p


def add_parsers(sub: Any) -> None:
    w = sub.add_parser("workspace", aliases=["w"], help="manage workspaces")
    wsub = w.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    _cmd(wsub, "create", ws_create, "create a workspace (you become its admin)", "name", json=True)
    p = _cmd(wsub, "list", ws_list, "list the workspaces you may see", json=True)
    p.add_argument("-a", "--all", action="store_true", help="include archived ones")
    _cmd(wsub, "describe", ws_describe, "describe a workspace", "workspace_name", json=True)
    p = _cmd(wsub, "edit", ws_edit, "rename a workspace", "workspace_name", json=True)
    p.add_argument("--name", required=True, help="the new name")
    _cmd(wsub, "archive", ws_archive, "archive a workspace", "workspace_name", archive=True)
    _cmd(wsub, "unarchive", ws_archive, "unarchive a workspace", "workspace_name", archive=False)
    p = _cmd(wsub, "delete", ws_delete, "delete a workspace and all in it", "workspace_name")
    p.add_argument("--yes", action="store_true", help="do not ask")
    _cmd(wsub, "list-projects", ws_projects, "list a workspace's projects", "workspace_name", json=True)

    pr = sub.add_parser("project", aliases=["p"], help="manage projects")
    psub = pr.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    p = _cmd(psub, "create", p_create, "create a project", "workspace_name", "name", json=True)
    p.add_argument("--description", default=None)
    p.add_argument("--key", default=None, help="1 to 5 letters or digits (default: from the name)")
    p = _cmd(psub, "list", p_list, "list projects (of one workspace, or all you may see)", json=True)
    p.add_argument("workspace_name", nargs="?", default=None)
    _cmd(psub, "describe", p_describe, "describe a project", "workspace_name", "project_name", json=True)
    p = _cmd(psub, "edit", p_edit, "rename or describe a project", "workspace_name", "project_name",
             json=True)
    p.add_argument("--new-name", "--new_name", dest="new_name", default=None)
    p.add_argument("--description", default=None)
    p.add_argument("--key", default=None)
    _cmd(psub, "archive", p_archive, "archive a project", "workspace_name", "project_name", archive=True)
    _cmd(psub, "unarchive", p_archive, "unarchive a project", "workspace_name", "project_name",
         archive=False)
    p = _cmd(psub, "delete", p_delete, "delete a project and its experiments", "workspace_name",
             "project_name")
    p.add_argument("--yes", action="store_true", help="do not ask")
    p = _cmd(psub, "list-experiments", p_experiments, "list a project's experiments", "workspace_name",
             "project_name", json=True)
    p.add_argument("-a", "--all", action="store_true", help="every user's, archived ones too")
