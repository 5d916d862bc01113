"""``det notebook …`` and ``det cmd …``: interactive tasks on the cluster."""

from __future__ import annotations

import argparse
import os
import sys
import webbrowser
from typing import Any

from det_jupyter.client import Command, DetClientError, Determined, Task

from ._progress import StatusLine
from ._table import format_table
from ._task_config import ConfigError, task_config
from .common import CommandError, connect, print_json, read_config_file, short_time

HEADERS = ["ID", "Owner", "Description", "State", "Pool", "Start Time", "Exit Status"]
_WARNINGS = {"LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED":
             "it asks for more slots than its pool has now; it waits (det job list says why)"}


def _config(args: argparse.Namespace) -> dict[str, Any]:
    text = read_config_file(args.config_file) if args.config_file else None
    try:
        return task_config(text, args.config or [], args.config_file or "the config file")
    except ConfigError as exc:
        raise CommandError(str(exc)) from None


def _row(t: Task) -> list[Any]:
    return [t.id, t.username, t.description, t.state, t.resource_pool, short_time(t.start_time),
            t.exit_status]


def _warn(task: Task) -> None:
    for warning in task.launch_warnings:
        hint = _WARNINGS.get(warning, "")
        print(f"Warning: {warning}{': ' + hint if hint else ''}", file=sys.stderr, flush=True)


def waiting_text(state: str, reason: str | None, what: str) -> str:
    """The status line while a task is not running yet: why it waits."""
    if state == "QUEUED":
        return f"queued: {reason or 'waiting for a free slot'}"
    if state == "STARTING":
        return f"starting {what}"
    return state.lower()


def _has_display() -> bool:
    return sys.platform in ("darwin", "win32") or bool(os.environ.get("DISPLAY")
                                                       or os.environ.get("WAYLAND_DISPLAY"))


def _open(url: str, no_browser: bool) -> None:
    if not no_browser and _has_display():
        webbrowser.open(url)


def _wait_running(task: Task, what: str, timeout: float | None) -> Task:
    status = StatusLine()

    def show(t: Task) -> None:
        reason = t.wait_reason() if t.state == "QUEUED" else None
        status.update(f"{t.key} {t.id}: {waiting_text(t.state, reason, what)}")

    try:
        return task.wait_running(timeout=timeout, on_update=show)
    finally:
        status.done()


# -- notebooks ------------------------------------------------------------------------------

def nb_start(args: argparse.Namespace) -> int:
    client = connect(args)
    nb = client.launch_notebook(_config(args), args.context, template=args.template)
    return follow_launch(nb, "notebook", "JupyterLab", args)


def follow_launch(task: Any, what: str, server: str, args: argparse.Namespace) -> int:
    """After a launch: the URL, then (unless --detach) a live wait until ``server`` answers,
    and the browser (unless --no-browser)."""
    _warn(task)
    print(f"Launched {what} {task.id}", flush=True)
    print(f"URL: {task.url}", flush=True)
    if args.detach:
        return 0
    _wait_running(task, server, args.timeout)
    if task.state != "RUNNING":
        raise CommandError(f"{what} {task.id} ended before it ran: {task.exit_status or task.state}")
    print(f"{what[0].upper()}{what[1:]} {task.id} is running: {task.url}", flush=True)
    _open(task.url, args.no_browser)
    return 0


def _mine(client: Determined, everyone: bool) -> list[str]:
    return [] if everyone else [client.username or client.whoami()["username"]]


def _list(args: argparse.Namespace, tasks: list[Any]) -> int:
    if args.json:
        print_json([t.to_dict() for t in tasks])
    else:
        print(format_table(HEADERS, [_row(t) for t in tasks]))
    return 0


def nb_list(args: argparse.Namespace) -> int:
    client = connect(args)
    return _list(args, client.list_notebooks(_mine(client, args.all)))


def nb_open(args: argparse.Namespace) -> int:
    return open_task(connect(args).get_notebook(args.task_id), "notebook", args.no_browser)


def open_task(task: Any, what: str, no_browser: bool) -> int:
    """Print a running task's link and open it in a browser (an ended one is an error)."""
    if task.state == "TERMINATED":
        raise CommandError(f"{what} {task.id} has ended: {task.exit_status or 'it exited'}")
    print(task.url)
    _open(task.url, no_browser)
    return 0


def _get(args: argparse.Namespace) -> Task:
    client = connect(args)
    return client.get_notebook(args.task_id) if args.kind == "notebook" else client.get_command(args.task_id)


def kill(args: argparse.Namespace) -> int:
    task = _get(args)
    task.kill()
    print(f"Killed {args.kind} {task.id}")
    return 0


def logs(args: argparse.Namespace) -> int:
    return print_logs(_get(args), args)


def print_logs(task: Task, args: argparse.Namespace) -> int:
    """A task's log lines: all, the first ``--head`` or the last ``--tail``; ``-f`` follows."""
    head, tail = getattr(args, "head", None), getattr(args, "tail", None)
    if (head is not None and head < 0) or (tail is not None and tail < 0):
        raise CommandError("--head and --tail take a number of lines (0 or more)")
    if tail is not None:
        import collections

        so_far = list(task.logs(follow=False))
        for line in collections.deque(so_far, maxlen=tail) if tail else ():
            print(line, flush=args.follow)
        if args.follow:  # then what comes after the lines read so far
            for n, line in enumerate(task.logs(follow=True)):
                if n >= len(so_far):
                    print(line, flush=True)
        return 0
    lines = task.logs(follow=args.follow)
    for n, line in enumerate(lines):
        if head is not None and n >= head:
            break
        print(line, flush=args.follow)
    return 0


def add_logs_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until it ends")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--head", type=int, metavar="N", help="only the first N lines")
    which.add_argument("--tail", type=int, metavar="N", help="only the last N lines")


def set_priority(args: argparse.Namespace) -> int:
    task = _get(args)
    task.set_priority(args.priority)
    print(f"Set the priority of {args.kind} {task.id} to {args.priority}")
    return 0


# -- commands -------------------------------------------------------------------------------

def cmd_run(args: argparse.Namespace) -> int:
    argv = list(args.entrypoint)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise CommandError("det cmd run needs a command: det cmd run [options] -- COMMAND ...")
    client = connect(args)
    cmd = client.launch_command(argv, _config(args), args.context, template=args.template)
    _warn(cmd)
    print(f"Launched command {cmd.id}", file=sys.stderr, flush=True)
    if args.detach:
        print(cmd.id)
        return 0
    for line in cmd.logs(follow=True):
        print(line, flush=True)
    return _exit_code(cmd)


def _exit_code(cmd: Command) -> int:
    """The command's own exit code once the master recorded it (1 when it ended without one)."""
    try:
        cmd.wait_ended(timeout=30, interval=0.2)
    except DetClientError as exc:  # the logs were printed; say why the code is unknown
        print(f"Command {cmd.id}: exit status unknown ({exc})", file=sys.stderr)
        return 1
    code = cmd.exit_code
    if code is None:
        print(f"Command {cmd.id} ended: {cmd.exit_status}", file=sys.stderr)
        return 1
    return code if 0 <= code < 256 else 1


def cmd_list(args: argparse.Namespace) -> int:
    client = connect(args)
    return _list(args, client.list_commands(_mine(client, args.all)))


# -- parsers --------------------------------------------------------------------------------

def _config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config-file", metavar="FILE", help="YAML task config")
    p.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="set a config key (dotted, e.g. resources.slots=0); wins over the file; "
                        "repeatable")
    p.add_argument("--template", metavar="NAME", default=None,
                   help="config template merged into the config (the config wins)")
    p.add_argument("-c", "--context", metavar="DIR", help="directory uploaded into the task's "
                   "working directory (.detignore honoured)")
    p.add_argument("-d", "--detach", action="store_true", help="print the id and return at once")


def _common_verbs(sub: Any, kind: str) -> None:
    p = sub.add_parser("kill", help=f"kill a {kind}")
    p.add_argument("task_id")
    p.set_defaults(func=kill, kind=kind)
    p = sub.add_parser("logs", help=f"a {kind}'s logs")
    p.add_argument("task_id")
    add_logs_args(p)
    p.set_defaults(func=logs, kind=kind)
    s = sub.add_parser("set", help=f"change a {kind}'s settings")
    ssub = s.add_subparsers(dest="setting", metavar="SETTING", required=True)
    p = ssub.add_parser("priority", help=f"the {kind}'s job priority (1-99, lower first)")
    p.add_argument("task_id")
    p.add_argument("priority", type=int)
    p.set_defaults(func=set_priority, kind=kind)


def _list_parser(sub: Any, kind: str, func: Any) -> None:
    p = sub.add_parser("list", aliases=["ls"], help=f"list {kind}s")
    p.add_argument("-a", "--all", action="store_true", help=f"every user's {kind}s")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=func)


def add_parsers(sub: Any) -> None:
    nb = sub.add_parser("notebook", help="JupyterLab notebooks on the cluster")
    nsub = nb.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    p = nsub.add_parser("start", help="start a notebook, wait until it runs, open it")
    _config_args(p)
    p.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="give up waiting after S seconds (the notebook stays)")
    p.set_defaults(func=nb_start)
    _list_parser(nsub, "notebook", nb_list)
    p = nsub.add_parser("open", help="print a notebook's link and open it in a browser")
    p.add_argument("task_id")
    p.add_argument("--no-browser", action="store_true", help="only print the link")
    p.set_defaults(func=nb_open)
    _common_verbs(nsub, "notebook")

    cmd = sub.add_parser("command", aliases=["cmd"], help="commands on the cluster")
    csub = cmd.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    p = csub.add_parser("run", help="run a command, print its logs, exit with its code")
    _config_args(p)
    p.add_argument("entrypoint", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                   help="the command and its arguments (one word: a shell line)")
    p.set_defaults(func=cmd_run)
    _list_parser(csub, "command", cmd_list)
    _common_verbs(csub, "command")

