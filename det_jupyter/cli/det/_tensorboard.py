"""``det tensorboard start|list|open|kill``: TensorBoard over trials' metrics, on the cluster."""

from __future__ import annotations

import argparse
from typing import Any

from det_jupyter.client.tensorboards import Tensorboard, launch_tensorboard, list_tensorboards

from ._table import format_table
from ._tasks import _config, add_logs_args, follow_launch, open_task, print_logs
from .common import CommandError, connect, print_json, short_time

HEADERS = ["ID", "Owner", "Experiments", "Trials", "State", "Start Time", "Exit Status"]


def _row(t: Tensorboard) -> list[Any]:
    return [t.id, t.username, ",".join(map(str, t.experiment_ids)),
            ",".join(map(str, t.trial_ids)), t.state, short_time(t.start_time), t.exit_status]


def start(args: argparse.Namespace) -> int:
    if not args.experiment_ids and not args.trial_ids:
        raise CommandError("name experiments (det tensorboard start 3 4) or trials (-t 7 8)")
    client = connect(args)
    tb = launch_tensorboard(client._session, args.experiment_ids, args.trial_ids,
                            _config(args), args.context)
    return follow_launch(tb, "TensorBoard", "TensorBoard", args)


def list_(args: argparse.Namespace) -> int:
    client = connect(args)
    users = [] if args.all else [client.username or client.whoami()["username"]]
    boards = list_tensorboards(client._session, users)
    if args.json:
        print_json([t.to_dict() for t in boards])
    else:
        print(format_table(HEADERS, [_row(t) for t in boards]))
    return 0


def _get(args: argparse.Namespace) -> Tensorboard:
    return Tensorboard(connect(args)._session, args.task_id)


def open_(args: argparse.Namespace) -> int:
    return open_task(_get(args), "TensorBoard", args.no_browser)


def kill(args: argparse.Namespace) -> int:
    tb = _get(args)
    tb.kill()
    print(f"Killed TensorBoard {tb.id}")
    return 0


def logs(args: argparse.Namespace) -> int:
    return print_logs(_get(args), args)


def add_parsers(sub: Any) -> None:
    tb = sub.add_parser("tensorboard", help="TensorBoard over experiments' and trials' metrics")
    tsub = tb.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    p = tsub.add_parser("start", help="start TensorBoard, wait until it answers, open it")
    p.add_argument("experiment_ids", type=int, nargs="*", metavar="EXPERIMENT_ID")
    p.add_argument("-t", "--trial-ids", type=int, nargs="+", default=[], metavar="TRIAL_ID",
                   help="trials to show (besides the experiments' trials)")
    p.add_argument("--config-file", metavar="FILE", help="YAML task config")
    p.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="set a config key (e.g. idle_timeout=10m); wins over the file; repeatable")
    p.add_argument("-c", "--context", metavar="DIR", help="directory uploaded into the task")
    p.add_argument("-d", "--detach", action="store_true", help="print the link and return at once")
    p.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="give up waiting after S seconds (the TensorBoard stays)")
    p.set_defaults(func=start)
    p = tsub.add_parser("list", aliases=["ls"], help="list TensorBoards")
    p.add_argument("-a", "--all", action="store_true", help="every user's TensorBoards")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_)
    p = tsub.add_parser("open", help="print a TensorBoard's link and open it in a browser")
    p.add_argument("task_id")
    p.add_argument("--no-browser", action="store_true", help="only print the link")
    p.set_defaults(func=open_)
    p = tsub.add_parser("kill", help="kill a TensorBoard")
    p.add_argument("task_id")
    p.set_defaults(func=kill)
    p = tsub.add_parser("logs", help="a TensorBoard's logs")
    p.add_argument("task_id")
    add_logs_args(p)
    p.set_defaults(func=logs)
