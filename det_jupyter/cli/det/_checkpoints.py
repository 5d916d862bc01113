"""``det checkpoint describe|download|delete``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ._table import format_pairs
from .common import CommandError, connect, print_json, short_time


def describe(args: argparse.Namespace) -> int:
    ckpt = connect(args).get_checkpoint(args.uuid)
    if args.json:
        print_json(ckpt.to_dict())
        return 0
    print(format_pairs([
        ("UUID", ckpt.uuid), ("State", ckpt.state), ("Experiment", ckpt.experiment_id),
        ("Trial", ckpt.trial_id), ("Batches", ckpt.steps_completed),
        ("Report time", short_time(ckpt.to_dict().get("reportTime"))),
        ("Metadata", json.dumps(ckpt.metadata, sort_keys=True)),
        ("Files", ", ".join(sorted(ckpt.resources))),
    ]))
    return 0


def download(args: argparse.Namespace) -> int:
    ckpt = connect(args).get_checkpoint(args.uuid)
    dest = ckpt.download(args.output_dir)
    print(f"Checkpoint {ckpt.uuid} copied to {dest}")
    return 0


def delete(args: argparse.Namespace) -> int:
    """Delete checkpoints (uuids space- or comma-separated, as the stock CLI takes them)."""
    uuids = [u for arg in args.uuids for u in arg.split(",") if u]
    if not args.yes:
        if not sys.stdin.isatty():
            raise CommandError(f"not deleting {len(uuids)} checkpoint(s) without confirmation: pass --yes")
        answer = input(f"Delete {len(uuids)} checkpoint(s) and their files for good? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("Nothing deleted")
            return 1
    connect(args).delete_checkpoints(uuids)
    print(f"Deleted checkpoint(s) {', '.join(uuids)}; their files are being removed")
    return 0


def add_parsers(sub: Any) -> None:
    c = sub.add_parser("checkpoint", aliases=["c"], help="inspect, download and delete checkpoints")
    csub = c.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    p = csub.add_parser("describe", help="a checkpoint's state, trial, metadata and files")
    p.add_argument("uuid")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=describe)
    p = csub.add_parser("download", help="copy a checkpoint's files (shared_fs storage on "
                                         "this host)")
    p.add_argument("uuid")
    p.add_argument("-o", "--output-dir", default=None,
                   help="where to put the files (default: ./checkpoints/UUID)")
    p.set_defaults(func=download)
    p = csub.add_parser("delete", help="delete checkpoints and their files (not those a model "
                                       "version uses, nor a running trial's latest)")
    p.add_argument("uuids", nargs="+", metavar="UUID", help="checkpoint uuids (or one comma-separated list)")
    p.add_argument("--yes", action="store_true", help="do not ask")
    p.set_defaults(func=delete)
