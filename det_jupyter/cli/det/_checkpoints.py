"""``det checkpoint list|describe|download|delete``, and the checkpoint listing and download
that ``det experiment list-checkpoints|download`` and ``det trial list-checkpoints|download``
share."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from det_jupyter.client import Checkpoint

from ._progress import CopyProgress
from ._table import format_pairs
from .common import (
    CommandError,
    add_output_args,
    connect,
    print_json,
    print_rows,
    short_time,
    size_fmt,
)

#: ``det e list-checkpoints``'s columns, as the stock CLI prints them.
LIST_HEADERS = ["Trial ID", "# of Batches", "State", "Validation Metric", "UUID", "Resources", "Size"]


def searcher_metric_of(ckpts: list[Checkpoint]) -> str:
    if not ckpts:
        return ""
    return str((ckpts[0].experiment_config.get("searcher") or {}).get("metric") or "")


def list_rows(ckpts: list[Checkpoint]) -> list[list[Any]]:
    metric = searcher_metric_of(ckpts)
    return [[c.trial_id, c.steps_completed, c.state, c.validation_metrics().get(metric) if metric else None,
             c.uuid, ", ".join(sorted(c.resources)), size_fmt(c.size())] for c in ckpts]


def print_list(ckpts: list[Checkpoint], args: argparse.Namespace) -> None:
    if getattr(args, "json", False):
        print_json([c.to_dict() for c in ckpts])
        return
    print_rows(LIST_HEADERS, list_rows(ckpts), getattr(args, "csv", False))


def list_for_experiment(args: argparse.Namespace) -> int:
    """``det e list-checkpoints ID [--best N]``: by end time, or the N best by the searcher
    metric (only validated checkpoints), as the stock CLI asks the master."""
    exp = connect(args).get_experiment(args.experiment_id)
    if args.best is not None and args.best < 1:
        raise CommandError("--best takes a positive number of checkpoints")
    if args.best:
        ckpts = exp.checkpoints(sort_by="SEARCHER_METRIC", limit=args.best)
    else:
        ckpts = exp.checkpoints(sort_by="END_TIME")
    print_list(ckpts, args)
    return 0


def fetch(ckpt: Checkpoint, dest: str | Path | None, quiet: bool = False, mode: str = "auto") -> Path:
    """Copy one checkpoint's files, with a progress bar when it is large; print where."""
    if ckpt.state in ("DELETED", "DELETING"):
        raise CommandError(f"checkpoint {ckpt.uuid} is {ckpt.state}: its files are gone")
    progress = CopyProgress(f"checkpoint {ckpt.uuid[:8]}")
    try:
        path = ckpt.download(dest, on_progress=progress, mode=mode)
    finally:
        progress.done()
    if quiet:
        print(path)
    else:
        print(f"Local checkpoint path:\n{path}\n")
        print(format_pairs(describe_pairs(ckpt)))
    return path


def describe_pairs(ckpt: Checkpoint) -> list[tuple[str, Any]]:
    return [
        ("Experiment ID", ckpt.experiment_id), ("Trial ID", ckpt.trial_id),
        ("Steps Completed", ckpt.steps_completed),
        ("Report Time", short_time(ckpt.to_dict().get("reportTime"))),
        ("Checkpoint UUID", ckpt.uuid), ("State", ckpt.state),
        ("Validation Metrics", json.dumps(ckpt.validation_metrics(), sort_keys=True)),
        ("Metadata", json.dumps(ckpt.metadata, sort_keys=True)),
        ("Files", ", ".join(sorted(ckpt.resources))), ("Size", size_fmt(ckpt.size())),
    ]


def describe(args: argparse.Namespace) -> int:
    ckpt = connect(args).get_checkpoint(args.uuid)
    if args.json:
        print_json(ckpt.to_dict())
        return 0
    print(format_pairs(describe_pairs(ckpt)))
    return 0


def download(args: argparse.Namespace) -> int:
    ckpt = connect(args).get_checkpoint(args.uuid)
    fetch(ckpt, args.output_dir, args.quiet, args.mode)
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
    p = csub.add_parser("list", aliases=["ls"], help="an experiment's checkpoints (det e list-checkpoints)")
    add_list_args(p)
    p.set_defaults(func=list_for_experiment)
    p = csub.add_parser("describe", help="a checkpoint's state, trial, metadata and files")
    p.add_argument("uuid")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=describe)
    p = csub.add_parser("download", help="copy a checkpoint's files")
    p.add_argument("uuid")
    p.add_argument("-o", "--output-dir", default=None,
                   help="where to put the files (default: ./checkpoints/UUID)")
    p.add_argument("-q", "--quiet", action="store_true", help="only print the checkpoint's path")
    add_mode_arg(p)
    p.set_defaults(func=download)
    p = csub.add_parser("delete", help="delete checkpoints and their files (not those a model "
                                       "version uses, nor a running trial's latest)")
    p.add_argument("uuids", nargs="+", metavar="UUID", help="checkpoint uuids (or one comma-separated list)")
    p.add_argument("--yes", action="store_true", help="do not ask")
    p.set_defaults(func=delete)


def add_mode_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=["auto", "direct", "master"], default="auto",
                   help="direct: copy from the checkpoint storage; master: through the master; "
                        "auto (default): direct where the storage is visible, else master")


def add_list_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_id", type=int)
    p.add_argument("--best", type=int, metavar="N",
                   help="the best N checkpoints by the searcher metric (only validated ones)")
    add_output_args(p)
