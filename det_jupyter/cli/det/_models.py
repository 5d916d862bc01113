"""``det model create|list|describe|register-version|list-versions|delete|move|archive|unarchive``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from det_jupyter.client import Model, ModelVersion

from ._table import cell, format_pairs, format_table
from .common import connect, print_json, short_time

MODEL_HEADERS = ["ID", "Name", "Workspace ID", "Versions", "Owner", "Archived", "Last Updated",
                 "Labels"]
VERSION_HEADERS = ["Version", "Name", "Checkpoint UUID", "Trial ID", "Batches", "State", "Owner",
                   "Created", "Comment"]


def _model_row(m: Model) -> list[Any]:
    d = m.to_dict()
    return [m.id, m.name, m.workspace_id, m.num_versions, m.username, m.archived,
            short_time(d.get("lastUpdatedTime")), m.labels]


def _version_row(v: ModelVersion) -> list[Any]:
    c = v.checkpoint
    return [v.version, v.name, c.uuid, c.trial_id, c.steps_completed, c.state, v.username,
            short_time(v.creation_time), v.comment]


def _describe_model(m: Model) -> str:
    d = m.to_dict()
    return format_pairs([
        ("ID", m.id), ("Name", m.name), ("Description", m.description),
        ("Workspace ID", m.workspace_id), ("Owner", m.username), ("Labels", m.labels),
        ("Archived", m.archived), ("Versions", m.num_versions),
        ("Created", short_time(d.get("creationTime"))),
        ("Last Updated", short_time(d.get("lastUpdatedTime"))),
        ("Metadata", json.dumps(m.metadata, sort_keys=True)),
    ])


def create(args: argparse.Namespace) -> int:
    m = connect(args).create_model(args.name, description=args.description or "",
                                   labels=args.label or (), workspace_name=args.workspace_name)
    if args.json:
        print_json(m.to_dict())
    else:
        print(f"Created model {cell(m.name)} (id {m.id}) in workspace {m.workspace_id}")
    return 0


def list_(args: argparse.Namespace) -> int:
    found = connect(args).search_models(
        name=args.name, labels=args.label or (),
        workspace_names=args.workspace_names.split(",") if args.workspace_names else (),
        archived=None if args.all else False)
    if args.json:
        print_json([m.to_dict() for m in found])
    else:
        print(format_table(MODEL_HEADERS, [_model_row(m) for m in found]))
    return 0


def describe(args: argparse.Namespace) -> int:
    m = connect(args).get_model(args.name)
    versions = m.versions()
    if args.json:
        print_json({**m.to_dict(), "versions": [v.to_dict() for v in versions]})
        return 0
    print(_describe_model(m))
    if versions:
        print()
        print(format_table(VERSION_HEADERS, [_version_row(v) for v in versions]))
    return 0


def register_version(args: argparse.Namespace) -> int:
    m = connect(args).get_model(args.name)
    v = m.register_version(args.uuid, name=args.version_name, comment=args.comment)
    if args.json:
        print_json(v.to_dict())
    else:
        print(f"Registered checkpoint {args.uuid} as version {v.version} of model {cell(m.name)}")
    return 0


def list_versions(args: argparse.Namespace) -> int:
    versions = connect(args).get_model(args.name).versions()
    if args.json:
        print_json([v.to_dict() for v in versions])
    else:
        print(format_table(VERSION_HEADERS, [_version_row(v) for v in versions]))
    return 0


def delete(args: argparse.Namespace) -> int:
    m = connect(args).get_model(args.name)
    m.delete()
    print(f"Deleted model {cell(m.name)} and its {m.num_versions} version(s); their checkpoints stay")
    return 0


def delete_version(args: argparse.Namespace) -> int:
    connect(args).get_model(args.name).get_version(args.version).delete()
    print(f"Deleted version {args.version} of model {args.name}")
    return 0


def move(args: argparse.Namespace) -> int:
    m = connect(args).get_model(args.name)
    m.move(args.workspace_name)
    print(f"Moved model {cell(m.name)} to workspace {args.workspace_name} (id {m.workspace_id})")
    return 0


def archive(args: argparse.Namespace) -> int:
    m = connect(args).get_model(args.name)
    m.archive(args.archive)
    print(f"Model {cell(m.name)} {'archived' if args.archive else 'unarchived'}")
    return 0


def add_parsers(sub: Any) -> None:
    m = sub.add_parser("model", help="the model registry: models and their versions")
    msub = m.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)

    p = msub.add_parser("create", help="register a new model (no versions yet)")
    p.add_argument("name")
    p.add_argument("--description", default=None, help="what the model is")
    p.add_argument("--label", action="append", help="a label (repeatable)")
    p.add_argument("-w", "--workspace-name", default=None,
                   help="workspace to create it in (default: Uncategorized)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=create)

    p = msub.add_parser("list", aliases=["ls"], help="models you may see")
    p.add_argument("--name", default=None, help="only names containing this")
    p.add_argument("--label", action="append", help="only models with this label (repeatable)")
    p.add_argument("-w", "--workspace-names", default=None,
                   help="only models in these comma-separated workspaces")
    p.add_argument("--all", action="store_true", help="archived ones too")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_)

    p = msub.add_parser("describe", help="a model and its versions")
    p.add_argument("name", help="model name or id")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=describe)

    p = msub.add_parser("register-version", help="make a COMPLETED checkpoint the model's next version")
    p.add_argument("name", help="model name or id")
    p.add_argument("uuid", help="checkpoint uuid")
    p.add_argument("--name", dest="version_name", default=None, help="the version's name")
    p.add_argument("--comment", default=None, help="a comment on the version")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=register_version)

    p = msub.add_parser("list-versions", help="the model's versions, newest first")
    p.add_argument("name", help="model name or id")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_versions)

    p = msub.add_parser("delete", help="delete a model and its versions (checkpoints stay)")
    p.add_argument("name", help="model name or id")
    p.set_defaults(func=delete)

    p = msub.add_parser("delete-version", help="delete one version (its checkpoint stays)")
    p.add_argument("name", help="model name or id")
    p.add_argument("version", type=int)
    p.set_defaults(func=delete_version)

    p = msub.add_parser("move", help="move a model to another workspace")
    p.add_argument("name", help="model name or id")
    p.add_argument("-w", "--workspace-name", required=True, help="destination workspace")
    p.set_defaults(func=move)

    for name, flag, help_ in (("archive", True, "archive a model (it takes no new versions)"),
                              ("unarchive", False, "unarchive a model")):
        p = msub.add_parser(name, help=help_)
        p.add_argument("name", help="model name or id")
        p.set_defaults(func=archive, archive=flag)
