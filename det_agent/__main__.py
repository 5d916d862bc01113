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
from ._agent import STATS_INTERVAL, Agent
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
        "--token",
        default=os.environ.get("DET_AGENT_TOKEN"),
        help="the master's agent token (default: $DET_AGENT_TOKEN); the master writes it to "
        "<data_dir>/agent_token on first start",
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


async def _serve(agent: Agent) -> None:
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[None]] = []

    def on_signal(signum: int) -> None:
        if not stopping:
            log.info("got %s; killing tasks and disconnecting", signal.Signals(signum).name)
            stopping.append(asyncio.create_task(agent.stop()))

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    await agent.run()
    if stopping:
        await stopping[0]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Flags and environment → settings; exits with status 2 and a message when one is wrong."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.master:
        parser.error("no master URL: pass --master http://host:port or set DET_MASTER")
    if not args.token:
        parser.error("no agent token: pass --token or set DET_AGENT_TOKEN")
    if args.slots is not None and args.slots < 1:
        parser.error(f"--slots must be at least 1, got {args.slots}")
    if not 0 <= args.stats_interval < math.inf:
        parser.error(f"--stats-interval must be 0 or more seconds, got {args.stats_interval}")
    if args.address is not None:
        try:
            validate_address(args.address)
        except ValueError as e:
            parser.error(str(e))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: sys.argv[1:]), run the agent until SIGINT/SIGTERM; exit status."""
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
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
        )
    except ValueError as e:
        _parser().error(str(e))
    asyncio.run(_serve(agent))
    return 0


if __name__ == "__main__":
    sys.exit(main())
