"""``det user login|logout|whoami`` (their parsers: _users), ``det master info``, ``det job …``,
``det agent …``, ``det slot …``."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Any

from det_jupyter.client import Determined, NotLoggedIn

from ._table import cell, format_pairs, format_table
from .common import CommandError, connect, print_json, short_time


def _read_password(user: str) -> str:
    """``DET_PASS``, else a hidden prompt on a terminal, else the first line of stdin."""
    if os.environ.get("DET_PASS"):
        return os.environ["DET_PASS"]
    if sys.stdin.isatty():
        return getpass.getpass(f"Password for user '{user}': ")
    return sys.stdin.readline().rstrip("\r\n")


def login(args: argparse.Namespace) -> int:
    user = args.username or args.user or "determined"
    password = args.password if args.password is not None else _read_password(user)
    client = Determined(args.master, user, password)
    print(f"Logged in to {client.master} as '{user}'")
    return 0


def logout(args: argparse.Namespace) -> int:
    try:
        client = Determined(args.master, args.user)
    except NotLoggedIn:
        print("Not logged in")
        return 0
    client.logout()
    print(f"Logged out of {client.master}")
    return 0


def whoami(args: argparse.Namespace) -> int:
    me = connect(args).whoami()
    print(f"You are logged in as user '{cell(me['username'])}'")
    return 0


def master_info(args: argparse.Namespace) -> int:
    client = connect(args)
    info = client.master_info()
    if args.json:
        print_json(info)
    else:
        first = ["version", "detJupyterVersion", "clusterName", "clusterId", "masterId"]
        rest = sorted(k for k in info if k not in first)
        print(format_pairs([("master", client.master),
                            *((k, info[k]) for k in first + rest if k in info)]))
    return 0


def _slots_text(job: dict[str, Any]) -> str:
    return f"{job.get('allocatedSlots', 0)}/{job.get('requestedSlots', 0)}"


def job_list(args: argparse.Namespace) -> int:
    jobs = connect(args).list_jobs(args.resource_pool)
    if args.json:
        print_json(jobs)
        return 0
    rows = [[i, j.get("jobId"), (j.get("type") or "").removeprefix("TYPE_"), j.get("name"),
             j.get("priority"), short_time(j.get("submissionTime")), _slots_text(j),
             (j.get("summary") or {}).get("state", "").removeprefix("STATE_"),
             j.get("username"), j.get("waitReason")]
            for i, j in enumerate(jobs)]
    print(format_table(["#", "ID", "Type", "Job Name", "Priority", "Submitted", "Slots",
                        "Status", "User", "Wait Reason"], rows))
    return 0


def job_update(args: argparse.Namespace) -> int:
    if all(v is None for v in (args.priority, args.weight, args.resource_pool, args.ahead_of,
                               args.behind_of)):
        raise CommandError("say what to change: --priority, --weight, --resource-pool, "
                           "--ahead-of or --behind-of")
    connect(args).update_job(args.job_id, priority=args.priority, weight=args.weight,
                             resource_pool=args.resource_pool, ahead_of=args.ahead_of,
                             behind_of=args.behind_of)
    print(f"Updated job {args.job_id}")
    return 0


def agent_enable(args: argparse.Namespace) -> int:
    enabled = args.subcommand == "enable"
    connect(args).set_agent_enabled(args.agent_id, enabled, drain=getattr(args, "drain", False))
    state = "enabled" if enabled else ("draining" if args.drain else "disabled")
    print(f"Agent {args.agent_id} {state}")
    return 0


def slot_enable(args: argparse.Namespace) -> int:
    enabled = args.subcommand == "enable"
    connect(args).set_slot_enabled(args.agent_id, args.slot_id, enabled)
    print(f"Slot {args.slot_id} of agent {args.agent_id} {'enabled' if enabled else 'disabled'}")
    return 0


def agent_list(args: argparse.Namespace) -> int:
    agents = connect(args).list_agents()
    if args.json:
        print_json(agents)
        return 0
    rows = [[a.get("id"), a.get("version"), short_time(a.get("registeredTime")),
             len(a.get("slots") or {}), a.get("numContainers"), a.get("resourcePools"),
             a.get("enabled"), a.get("draining"), a.get("addresses")] for a in agents]
    print(format_table(["Agent ID", "Version", "Registered Time", "Slots", "Containers",
                        "Resource Pool", "Enabled", "Draining", "Addresses"], rows))
    return 0


def slot_list(args: argparse.Namespace) -> int:
    agents = connect(args).list_agents()
    slots = [(a, s) for a in agents for _, s in sorted((a.get("slots") or {}).items())]
    if args.json:
        print_json([{"agentId": a.get("id"), **s} for a, s in slots])
        return 0
    rows = [[a.get("id"), a.get("resourcePools"), s.get("id"), s.get("enabled"),
             s.get("draining"), (s.get("container") or {}).get("id"),
             (s.get("device") or {}).get("type", "").removeprefix("TYPE_"),
             (s.get("device") or {}).get("brand")] for a, s in slots]
    print(format_table(["Agent ID", "Resource Pool", "Slot ID", "Enabled", "Draining",
                        "Allocation ID", "Type", "Device"], rows))
    return 0


def add_parsers(sub: Any) -> None:
    # `det user` (login, logout, whoami and user administration) is built in _users.
    m = sub.add_parser("master", aliases=["m"], help="the master")
    msub = m.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    p = msub.add_parser("info", help="the master's version and cluster")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=master_info)

    j = sub.add_parser("job", aliases=["j"], help="the job queue")
    jsub = j.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    p = jsub.add_parser("list", aliases=["ls"], help="jobs in a pool's queue, in order")
    p.add_argument("--resource-pool", "-r", help="pool (default: the default compute pool)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=job_list)
    p = jsub.add_parser("update", help="change a queued job: priority, weight, pool, place")
    p.add_argument("job_id", help="the job's ID (det job list)")
    p.add_argument("--priority", type=int, help="1-99, lower runs first (priority scheduler)")
    p.add_argument("--weight", type=float, help="fair-share weight")
    p.add_argument("--resource-pool", help="move it to another pool")
    p.add_argument("--ahead-of", metavar="JOB_ID", help="put it just ahead of this job")
    p.add_argument("--behind-of", metavar="JOB_ID", help="put it just behind this job")
    p.set_defaults(func=job_update)

    a = sub.add_parser("agent", aliases=["a"], help="agents")
    asub = a.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    p = asub.add_parser("list", aliases=["ls"], help="connected agents")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=agent_list)
    p = asub.add_parser("enable", help="let the scheduler place tasks on an agent again")
    p.add_argument("agent_id")
    p.set_defaults(func=agent_enable)
    p = asub.add_parser("disable", help="stop placing tasks on an agent (its tasks are killed "
                        "unless --drain lets them finish)")
    p.add_argument("agent_id")
    p.add_argument("--drain", action="store_true", help="let running tasks finish")
    p.set_defaults(func=agent_enable)

    s = sub.add_parser("slot", aliases=["s"], help="slots of the agents")
    ssub = s.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    p = ssub.add_parser("list", aliases=["ls"], help="every slot of every agent")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=slot_list)
    for action, text in (("enable", "let the scheduler use a slot again"),
                         ("disable", "stop the scheduler using a slot")):
        p = ssub.add_parser(action, help=text)
        p.add_argument("agent_id")
        p.add_argument("slot_id")
        p.set_defaults(func=slot_enable)
