"""``det template create|list|describe|set-value config|set|remove`` (alias ``det tpl``; the
stock CLI's names and arguments)."""

from __future__ import annotations

import argparse
from typing import Any

import yaml

from det_jupyter.client import NotFound
from det_jupyter.client import templates as tpl

from ._table import cell, format_table
from .common import CommandError, connect, print_json


def _workspace_id(d: Any, name: str | None) -> int | None:
    if name is None:
        return None
    try:
        found = d._session.get("/api/v1/workspaces", name=name).get("workspaces") or []
    except NotFound:
        found = []
    for ws in found:
        if ws["name"] == name:
            return int(ws["id"])
    raise CommandError(f"no workspace named {name!r} that you can see; det workspace list shows them")


def _workspace_names(d: Any) -> dict[int, str]:
    """Workspace id -> name; empty when the master lists no workspaces (ids are shown)."""
    try:
        found = d._session.get("/api/v1/workspaces").get("workspaces") or []
    except NotFound:
        return {}
    return {int(w["id"]): w["name"] for w in found}


def _yaml(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, default_flow_style=False, sort_keys=False).rstrip("\n")


def list_(args: argparse.Namespace) -> int:
    d = connect(args)
    found = tpl.list_templates(d)
    if args.json:
        print_json(found)
        return 0
    names = _workspace_names(d)
    rows = [[t["name"], names.get(t["workspaceId"], t["workspaceId"])] for t in found]
    if not args.details:
        print(format_table(["Name", "Workspace"], rows))
        return 0
    for (name, ws), t in zip(rows, found, strict=True):
        print(f"{cell(name)}  (workspace {cell(ws)})")
        print("  " + _yaml(t["config"]).replace("\n", "\n  ") if t["config"] else "  {}")
        print()
    return 0


def describe(args: argparse.Namespace) -> int:
    found = tpl.get_template(connect(args), args.template_name)
    if args.json:
        print_json(found)
    else:
        print(_yaml(found["config"]))
    return 0


def create(args: argparse.Namespace) -> int:
    d = connect(args)
    tpl.create_template(d, args.template_name, args.template_file,
                        _workspace_id(d, args.workspace_name))
    print(f"Created template {args.template_name}")
    return 0


def set_config(args: argparse.Namespace) -> int:
    tpl.set_template_config(connect(args), args.template_name, args.template_file)
    print(f"Updated template {args.template_name}")
    return 0


def set_(args: argparse.Namespace) -> int:
    """The deprecated upsert: update the config if the template exists, else create it."""
    d = connect(args)
    try:
        tpl.get_template(d, args.template_name)
    except NotFound:
        tpl.create_template(d, args.template_name, args.template_file)
    else:
        tpl.set_template_config(d, args.template_name, args.template_file)
    print(f"Set template {args.template_name}")
    return 0


def remove(args: argparse.Namespace) -> int:
    tpl.delete_template(connect(args), args.template_name)
    print(f"Removed template {args.template_name}")
    return 0


def _name_and_file(p: argparse.ArgumentParser) -> None:
    p.add_argument("template_name", help="template name")
    p.add_argument("template_file", help="config template file (.yaml)")


def add_parsers(sub: Any) -> None:
    t = sub.add_parser("template", aliases=["tpl"], help="manage config templates")
    tsub = t.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    p = tsub.add_parser("list", aliases=["ls"], help="list config templates")
    p.add_argument("-d", "--details", action="store_true", help="show the configs of the templates")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_)
    p = tsub.add_parser("describe", help="print a template's config (YAML)")
    p.add_argument("template_name", help="template name")
    p.add_argument("--json", action="store_true", help="print JSON (name, config, workspaceId)")
    p.set_defaults(func=describe)
    p = tsub.add_parser("create", help="create a config template")
    _name_and_file(p)
    p.add_argument("-w", "--workspace-name", default=None,
                   help="the workspace it belongs to (default: Uncategorized)")
    p.set_defaults(func=create)
    p = tsub.add_parser("set-value", help="set template attributes")
    vsub = p.add_subparsers(dest="attribute", metavar="ATTRIBUTE", required=True)
    p = vsub.add_parser("config", help="replace a template's config")
    _name_and_file(p)
    p.set_defaults(func=set_config)
    p = tsub.add_parser("set", help="create or update a template (deprecated: use create or "
                                    "set-value config)")
    _name_and_file(p)
    p.set_defaults(func=set_)
    p = tsub.add_parser("remove", aliases=["rm"], help="remove a config template")
    p.add_argument("template_name", help="template name")
    p.set_defaults(func=remove)
