"""``det checkpoint describe|download``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._common import connect, print_json, short_time
from ._table import format_pairs


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


def add_parsers(sub: Any) -> None:
    c = sub.add_parser("checkpoint", aliases=["c"], help="inspect and download checkpoints")
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
