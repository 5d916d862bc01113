"""``det shell start|open|tunnel|list|kill``: an SSH session into a task, through the master.

``open`` fetches the shell's private key (its owner's only), writes it to a 0600 file under
the det-jupyter config dir, and runs the ssh client with a ``ProxyCommand`` that is this CLI's
``shell tunnel``: ssh's bytes travel over the master's websocket, so no network path to the
agent is needed. ``--show-ssh-command`` prints that command instead, for any OpenSSH client.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from det_jupyter.client.session import Session, config_dir

from . import _tunnel
from ._progress import StatusLine
from ._table import format_table
from ._task_config import ConfigError, task_config
from .common import CommandError, connect, print_json, read_config_file, short_time

HEADERS = ["ID", "Owner", "Description", "State", "Start Time", "Exit Status"]
_ENDED = {"STATE_TERMINATING", "STATE_TERMINATED"}


def ssh_command(tunnel_argv: list[str], key_file: str, username: str, task_id: str,
                extra: list[str] = (), ssh: str = "ssh") -> list[str]:  # type: ignore[assignment]
    """The ssh argv that reaches ``task_id`` through ``tunnel_argv`` (run by ssh as its
    ``ProxyCommand``, through a shell: so quoted, and ``%`` doubled for ssh's own escapes)."""
    proxy = shlex.join(tunnel_argv).replace("%", "%%")
    return [ssh, "-o", f"ProxyCommand={proxy}", "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "IdentitiesOnly=yes",
            "-o", "LogLevel=ERROR", "-i", key_file, f"{username}@{task_id}", *extra]


def tunnel_argv(master: str, user: str | None, task_id: str) -> list[str]:
    """This CLI's ``shell tunnel`` as a command line: the running interpreter, so it works
    from a virtual environment whose ``det`` is not on PATH."""
    argv = [sys.executable, "-m", "det_jupyter.cli.det", "-m", master]
    if user:
        argv += ["-u", user]
    return [*argv, "shell", "tunnel", task_id]


def split_extra(rest: list[str]) -> tuple[bool, list[str]]:
    """What follows the shell ID: (--show-ssh-command given?, the arguments for ssh). Before a
    ``--`` our flag may appear anywhere; everything after it goes to ssh as it is."""
    if "--" in rest:
        cut = rest.index("--")
        head, tail = rest[:cut], rest[cut + 1:]
    else:
        head, tail = rest, []
    show = "--show-ssh-command" in head
    return show, [a for a in head if a != "--show-ssh-command"] + tail


def key_path(task_id: str) -> Path:
    return config_dir() / "shells" / f"{task_id}.key"


def write_key(task_id: str, private_key: str) -> Path:
    """The private key in a 0600 file (its directory 0700), as ssh demands."""
    path = key_path(task_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(private_key if private_key.endswith("\n") else private_key + "\n")
    os.chmod(path, 0o600)
    return path


def _session(args: argparse.Namespace) -> tuple[Any, Session]:
    client = connect(args)
    return client, Session(client.master, client.token)


def _wait_ready(session: Session, task_id: str, timeout: float | None = None) -> dict[str, Any]:
    """The shell once its SSH server answers; CommandError if it ends first."""
    status = StatusLine()
    start = time.monotonic()
    try:
        while True:
            shell = session.get(f"/api/v1/shells/{task_id}")["shell"]
            state = shell["state"]
            if state == "STATE_RUNNING":
                return shell
            if state in _ENDED:
                raise CommandError(f"shell {task_id} ended: {shell.get('exitStatus') or state}")
            status.update(f"shell {task_id} {state.removeprefix('STATE_').lower()}…")
            if timeout is not None and time.monotonic() - start > timeout:
                raise CommandError(f"shell {task_id} is still {state} after {timeout:g} s")
            time.sleep(0.5)
    finally:
        status.done()


def _open(args: argparse.Namespace, client: Any, session: Session, task_id: str,
          extra: list[str]) -> int:
    shell = _wait_ready(session, task_id)
    private = shell.get("privateKey")
    if not private:
        raise CommandError(f"only the owner of shell {task_id} has its key")
    key = write_key(task_id, private)
    ssh = shutil.which("ssh")
    show, extra = split_extra(extra)
    cmd = ssh_command(tunnel_argv(client.master, client.username or shell.get("username"), task_id),
                      str(key), shell.get("username") or "det", task_id, extra, ssh or "ssh")
    if show or args.show_ssh_command:
        print(shlex.join(cmd))
        return 0
    if ssh is None:
        raise CommandError("no ssh client on PATH (install OpenSSH); --show-ssh-command prints "
                           "the command for another one")
    return subprocess.call(cmd)


def start(args: argparse.Namespace) -> int:
    client, session = _session(args)
    text = read_config_file(args.config_file) if args.config_file else None
    try:
        config = task_config(text, args.config or [], args.config_file or "the config file")
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    body = session.post("/api/v1/shells", {"config": config})
    task_id = body["shell"]["id"]
    print(f"Launched shell {task_id}", file=sys.stderr if not args.detach else sys.stdout,
          flush=True)
    for warning in body.get("warnings") or []:
        print(f"Warning: {warning}", file=sys.stderr, flush=True)
    if args.detach:
        return 0
    return _open(args, client, session, task_id, list(args.ssh_args or []))


def open_(args: argparse.Namespace) -> int:
    client, session = _session(args)
    return _open(args, client, session, args.shell_id, list(args.ssh_args or []))


def tunnel(args: argparse.Namespace) -> int:
    client = connect(args)
    if not client.token:
        raise CommandError("not logged in; run det user login")
    return _tunnel.run(client.master, args.shell_id, client.token)


def list_(args: argparse.Namespace) -> int:
    client, session = _session(args)
    params: dict[str, Any] = {}
    if not args.all:
        params["users"] = client.username or client.whoami()["username"]
    shells = session.get("/api/v1/shells", **params)["shells"]
    if args.json:
        print_json(shells)
        return 0
    print(format_table(HEADERS, [[s["id"], s.get("username", ""), s.get("description", ""),
                                  s["state"].removeprefix("STATE_"), short_time(s.get("startTime")),
                                  s.get("exitStatus", "")] for s in shells]))
    return 0


def kill(args: argparse.Namespace) -> int:
    _, session = _session(args)
    for task_id in args.shell_ids:
        session.post(f"/api/v1/shells/{task_id}/kill")
        print(f"Killed shell {task_id}")
    return 0


def set_priority(args: argparse.Namespace) -> int:
    """``det shell set priority ID N``: when it starts (a running shell is never preempted)."""
    _, session = _session(args)
    session.post(f"/api/v1/shells/{args.shell_id}/set_priority", {"priority": args.priority})
    print(f"Set the priority of shell {args.shell_id} to {args.priority}")
    return 0


def add_parsers(sub: Any) -> None:
    s = sub.add_parser("shell", help="SSH sessions into tasks on the cluster")
    ssub = s.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)

    p = ssub.add_parser("start", help="start a shell and open an SSH session into it")
    p.add_argument("--config-file", default=None, help="the shell's task config (YAML)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="a config entry, e.g. resources.slots=0 (repeatable; wins over the file)")
    p.add_argument("-d", "--detach", action="store_true",
                   help="print the shell's ID and exit, without waiting or opening it")
    p.add_argument("--show-ssh-command", action="store_true",
                   help="once it is ready, print the ssh command instead of running it")
    p.add_argument("ssh_args", nargs=argparse.REMAINDER,
                   help="after --: extra ssh options and/or a command to run")
    p.set_defaults(func=start)

    p = ssub.add_parser("open", help="open an SSH session into a running shell")
    p.add_argument("shell_id")
    p.add_argument("--show-ssh-command", action="store_true",
                   help="print the ssh command (for your own ssh client) instead of running it")
    p.add_argument("ssh_args", nargs=argparse.REMAINDER,
                   help="after --: extra ssh options and/or a command to run")
    p.set_defaults(func=open_)

    p = ssub.add_parser("tunnel", help="relay stdin/stdout to a shell (ssh's ProxyCommand)")
    p.add_argument("shell_id")
    p.set_defaults(func=tunnel)

    p = ssub.add_parser("list", aliases=["ls"], help="list shells")
    p.add_argument("-a", "--all", action="store_true", help="every user's shells (admins)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=list_)

    p = ssub.add_parser("kill", help="kill shells")
    p.add_argument("shell_ids", nargs="+", metavar="shell_id")
    p.set_defaults(func=kill)

    p = ssub.add_parser("set", help="change a shell's settings")
    setsub = p.add_subparsers(dest="setting", metavar="SETTING", required=True)
    p = setsub.add_parser("priority", help="the shell's job priority (1-99, lower first)")
    p.add_argument("shell_id")
    p.add_argument("priority", type=int)
    p.set_defaults(func=set_priority)
