"""``det-agent``: connect this host to a det-jupyter master and run its tasks."""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import signal
import socket
import sys
from collections.abc import Sequence

from ._address import validate_address
from ._agent import DRAIN_TIMEOUT, RUNTIME_MODES, STATS_INTERVAL, Agent
from ._devices import detect_slots
from ._version import __version__

log = logging.getLogger("det_agent")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="det-agent",
        description="Run det-jupyter tasks on this host's GPUs (or CPUs when it has none).",
    )
    p.add_argument(
        "--master",
        default=os.environ.get("DET_MASTER"),
        help="the master's URL, e.g. http://10.0.0.5:8888 (default: $DET_MASTER)",
    )
    p.add_argument(
        "--token-file",
        metavar="PATH",
        default=None,
        help="file holding the master's agent token, which the master writes to "
        "<data_dir>/agent_token on first start; keep it mode 0600, tasks never see it "
        "(default: $DET_AGENT_TOKEN_FILE, else the token in $DET_AGENT_TOKEN)",
    )
    p.add_argument(
        "--token",
        default=None,
        help="the agent token itself; avoid: every user of this host sees it in the process "
        "list (use --token-file)",
    )
    p.add_argument(
        "--id",
        default=os.environ.get("DET_AGENT_ID") or socket.gethostname(),
        help="agent id, unique in the cluster and the same across restarts "
        "(default: $DET_AGENT_ID, else the hostname)",
    )
    p.add_argument(
        "--address",
        metavar="ADDR",
        default=os.environ.get("DET_AGENT_ADDRESS") or None,
        help="host name or IP other hosts' containers reach this one at, for distributed "
        "training (default: $DET_AGENT_ADDRESS, else the local IP of the route to the master, "
        "127.0.0.1 when the master is on loopback)",
    )
    p.add_argument(
        "--slots",
        type=int,
        default=None,
        help="number of CPU slots to offer when the host has no GPU (default: CPU count)",
    )
    p.add_argument(
        "--work-dir",
        default=os.path.join(os.path.expanduser("~"), ".local", "share", "det-agent"),
        help="where task directories live (default: ~/.local/share/det-agent)",
    )
    p.add_argument(
        "--task-python",
        metavar="ENV",
        default=os.environ.get("DET_AGENT_TASK_PYTHON") or None,
        help="the Python environment tasks' python3 runs: a virtual environment (or its python3) "
        "that has what their code imports, e.g. one with determined==0.38.1 installed so stock "
        "Determined configs run unmodified (default: $DET_AGENT_TASK_PYTHON, else the agent's own)",
    )
    p.add_argument(
        "--resource-pool",
        metavar="POOL",
        default=os.environ.get("DET_AGENT_RESOURCE_POOL", ""),
        help="resource pool this agent joins (default: $DET_AGENT_RESOURCE_POOL, else the "
        "master's default pool)",
    )
    p.add_argument(
        "--stats-interval",
        metavar="SECONDS",
        type=float,
        default=os.environ.get("DET_AGENT_STATS_INTERVAL") or str(STATS_INTERVAL),
        help="seconds between GPU utilization/memory reports to the master; 0 turns them off "
        f"(default: $DET_AGENT_STATS_INTERVAL, else {STATS_INTERVAL:g}; CPU slots send none)",
    )
    p.add_argument(
        "--task-user",
        metavar="NAME",
        default=os.environ.get("DET_AGENT_TASK_USER") or None,
        help="the unprivileged account tasks of unlinked users run as when the agent runs as "
        "root; created if missing (default: det-task)",
    )
    p.add_argument(
        "--drain-timeout",
        metavar="SECONDS",
        type=float,
        default=os.environ.get("DET_AGENT_DRAIN_TIMEOUT") or str(DRAIN_TIMEOUT),
        help="on SIGTERM or SIGINT the master preempts this agent's tasks (trials checkpoint and "
        "resume elsewhere); those still running after this many seconds are killed; a second "
        f"signal kills them at once (default: $DET_AGENT_DRAIN_TIMEOUT, else {DRAIN_TIMEOUT:g})",
    )
    p.add_argument(
        "--runtime",
        choices=list(RUNTIME_MODES),
        default=os.environ.get("DET_AGENT_RUNTIME") or "auto",
        help="how tasks whose config names an image (environment.image) run: 'docker' runs them "
        "in containers of the Docker engine at $DOCKER_HOST (else unix:///var/run/docker.sock) "
        "and refuses to start without it; 'process' never runs containers (the master sends "
        "such tasks elsewhere); 'auto' uses Docker when the engine answers at start-up. Tasks "
        "without an image always run as processes (default: $DET_AGENT_RUNTIME, else auto)",
    )
    p.add_argument(
        "--no-warm-start",
        dest="warm_start",
        action="store_false",
        help="start every task as a new process instead of forking Python tasks from a launcher "
        "that has the harness loaded",
    )
    p.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="agent log level (default: INFO)",
    )
    p.add_argument("--version", action="version", version=f"det-agent {__version__}")
    return p


async def _serve(agent: Agent, drain_timeout: float = DRAIN_TIMEOUT) -> None:
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[None]] = []

    def on_signal(signum: int) -> None:
        name = signal.Signals(signum).name
        if not stopping:
            log.info("got %s; preempting tasks (up to %g s; signal again to kill them now), "
                     "then leaving", name, drain_timeout)
            stopping.append(asyncio.create_task(agent.drain(drain_timeout)))
        else:
            log.info("got %s again; killing tasks and disconnecting", name)
            stopping.append(asyncio.create_task(agent.stop()))

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    await agent.run()
    if stopping:
        await asyncio.gather(*stopping)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Flags and environment → settings; exits with status 2 and a message when one is wrong."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.master:
        parser.error("no master URL: pass --master http://host:port or set DET_MASTER")
    _resolve_token(parser, args)
    if args.slots is not None and args.slots < 1:
        parser.error(f"--slots must be at least 1, got {args.slots}")
    if not 0 <= args.drain_timeout < math.inf:
        parser.error(f"--drain-timeout must be 0 or more seconds, got {args.drain_timeout}")
    if not 0 <= args.stats_interval < math.inf:
        parser.error(f"--stats-interval must be 0 or more seconds, got {args.stats_interval}")
    if args.address is not None:
        try:
            validate_address(args.address)
        except ValueError as e:
            parser.error(str(e))
    return args


def _resolve_token(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Set ``args.token`` (and ``args.token_file``, the file it came from, else None) from, in
    order: --token-file, --token, $DET_AGENT_TOKEN_FILE, $DET_AGENT_TOKEN. $DET_AGENT_TOKEN
    leaves this process's environment once read (tasks and children must not inherit it)."""
    from_env = os.environ.pop("DET_AGENT_TOKEN", None)
    if args.token_file is not None and args.token is not None:
        parser.error("pass the agent token either with --token-file or with --token, not both")
    args.token_in_argv = args.token is not None
    if args.token is None and args.token_file is None:
        args.token_file = os.environ.get("DET_AGENT_TOKEN_FILE") or None
        args.token = from_env
    if args.token_file is not None:
        args.token_file = os.path.abspath(args.token_file)
        try:
            with open(args.token_file, encoding="utf-8") as fh:
                args.token = fh.read().strip()
        except (OSError, UnicodeDecodeError) as e:
            parser.error(f"cannot read the agent token file {args.token_file}: {e}")
        if not args.token:
            parser.error(f"the agent token file {args.token_file} is empty")
    if not args.token:
        parser.error(
            "no agent token: pass --token-file PATH (a file holding the master's "
            "<data_dir>/agent_token) or set DET_AGENT_TOKEN_FILE"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: sys.argv[1:]), run the agent until SIGINT/SIGTERM; exit status."""
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.token_in_argv:
        log.warning(
            "--token puts the agent token in this process's command line, where every user of "
            "this host can read it (ps, /proc/<pid>/cmdline); use --token-file PATH instead"
        )
    if args.token_file is not None:
        try:
            if os.stat(args.token_file).st_mode & 0o077:
                log.warning("the agent token file %s is readable by other users; chmod 600 it",
                            args.token_file)
        except OSError:
            pass
    slots = detect_slots(args.slots)
    kinds = sorted({s.type for s in slots})
    log.info("offering %d slot(s) of type %s", len(slots), "/".join(kinds))
    try:
        agent = Agent(
            args.master,
            args.token,
            agent_id=args.id,
            slots=slots,
            work_dir=args.work_dir,
            resource_pool=args.resource_pool,
            warm_start=args.warm_start,
            address=args.address,
            stats_interval=args.stats_interval,
            task_user=args.task_user,
            hidden_paths=[args.token_file] if args.token_file else [],
            task_python=args.task_python,
            runtime_mode=args.runtime,
        )
    except ValueError as e:
        _parser().error(str(e))
    asyncio.run(_serve(agent, args.drain_timeout))
    return 0


if __name__ == "__main__":
    sys.exit(main())
