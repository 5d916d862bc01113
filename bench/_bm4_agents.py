"""BM-4's fake agents: N agents x S slots over real websockets, acknowledging every task at once.

Run by ``bm4_scheduler.py`` in a process of its own, so the master's CPU is measured alone:

    python bench/_bm4_agents.py --url http://127.0.0.1:PORT --agents 5 --slots 10 --expect 5000

The agent token comes from env DET_AGENT_TOKEN. Each agent opens one websocket to
``ws://host:port/agents?id=<id>`` with ``Authorization: Bearer <token>`` and speaks the protocol
of docs/internals.md ("Master <-> agent protocol"): it sends ``hello`` (CPU slots, nothing
running) and answers each ``start_task`` with ``task_started`` and ``task_exited`` (exit code
0) at once; the entrypoint never runs. It stops once ``--expect`` tasks were started and no
frame came for ``--idle`` seconds, or at ``--timeout``. It prints one JSON line: when the first
``hello`` was sent (``time.time()``, the master's clock on the same host), how many tasks each
agent started, slot ids the master handed out that the agent does not have, and its own CPU.

Imports only tornado and the standard library (never det_jupyter or det_agent).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from tornado.httpclient import HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

VERSION = "bm4-fake-agent"


def agents_url(master_url: str, agent_id: str) -> str:
    """``http://host:port[/base]`` -> ``ws://host:port[/base]/agents?id=<agent_id>``."""
    parts = urllib.parse.urlsplit(master_url.rstrip("/"))
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise ValueError(f"master URL {master_url!r} must look like http://host:port")
    query = urllib.parse.urlencode({"id": agent_id})
    return urllib.parse.urlunsplit((scheme, parts.netloc, parts.path + "/agents", query, ""))


def hello_frame(agent_id: str, slots: int) -> dict[str, Any]:
    """The first frame: ``slots`` CPU slots in the default pool, nothing running."""
    return {
        "type": "hello",
        "agent_id": agent_id,
        "resource_pool": "",
        "slots": [{"id": i, "type": "cpu", "name": "cpu", "uuid": None} for i in range(slots)],
        "running": [],
        "version": VERSION,
    }


def replies(allocation_id: str, pid: int) -> tuple[str, str]:
    """``task_started`` then ``task_exited`` (exit code 0), as websocket text."""
    started = {"type": "task_started", "allocation_id": allocation_id, "pid": pid}
    exited = {"type": "task_exited", "allocation_id": allocation_id, "exit_code": 0, "reason": None}
    return json.dumps(started, separators=(",", ":")), json.dumps(exited, separators=(",", ":"))


@dataclass
class Tally:
    """What all agents saw, shared by their loops (one event loop, no locks needed)."""

    expect: int
    starts: int = 0
    kills: int = 0
    bad_slots: int = 0
    first_hello: float | None = None
    first_start: float | None = None
    last_frame: float = 0.0
    per_agent: dict[str, int] = field(default_factory=dict)
    done: asyncio.Event = field(default_factory=asyncio.Event)


async def connect(url: str, token: str, agent_id: str) -> WebSocketClientConnection:
    request = HTTPRequest(agents_url(url, agent_id), headers={"Authorization": f"Bearer {token}"},
                          connect_timeout=30, request_timeout=30)
    return await websocket_connect(request, max_message_size=64 * 1024 * 1024)


async def serve(conn: WebSocketClientConnection, agent_id: str, slots: int, tally: Tally) -> None:
    """Answer this agent's frames until its socket closes or the run is done."""
    pid = os.getpid()
    tally.per_agent[agent_id] = 0
    while not tally.done.is_set():
        text = await conn.read_message()
        if text is None:
            return
        tally.last_frame = time.time()
        msg = json.loads(text)
        kind = msg.get("type")
        if kind == "start_task":
            alloc_id = msg["allocation_id"]
            if tally.first_start is None:
                tally.first_start = tally.last_frame
            ids = (msg.get("spec") or {}).get("slot_ids") or []
            tally.bad_slots += sum(1 for s in ids if not (isinstance(s, int) and 0 <= s < slots))
            started, exited = replies(alloc_id, pid)
            await conn.write_message(started)
            await conn.write_message(exited)
            tally.starts += 1
            tally.per_agent[agent_id] += 1
        elif kind == "kill_task":
            tally.kills += 1
            _, exited = replies(msg["allocation_id"], pid)
            await conn.write_message(exited)


async def watch(tally: Tally, idle: float, deadline: float) -> None:
    """Set ``done`` once every expected task started and the master fell quiet, or at the deadline."""
    while time.time() < deadline:
        if tally.starts >= tally.expect and time.time() - tally.last_frame >= idle:
            break
        await asyncio.sleep(min(0.05, idle))
    tally.done.set()


async def run(a: argparse.Namespace, token: str) -> dict[str, Any]:
    tally = Tally(expect=a.expect)
    deadline = time.time() + a.timeout
    ids = [f"{a.id_prefix}-{i}" for i in range(a.agents)]
    conns = await asyncio.gather(*(connect(a.url, token, i) for i in ids))
    for agent_id, conn in zip(ids, conns, strict=True):
        welcome = json.loads(await conn.read_message() or "{}")
        if welcome.get("type") != "welcome":
            raise RuntimeError(f"agent {agent_id}: expected a welcome frame, got {welcome!r}")
    tally.first_hello = time.time()
    for agent_id, conn in zip(ids, conns, strict=True):
        await conn.write_message(json.dumps(hello_frame(agent_id, a.slots)))
    loops = [asyncio.ensure_future(serve(c, i, a.slots, tally)) for i, c in zip(ids, conns, strict=True)]
    await watch(tally, a.idle, deadline)
    for task in loops:
        task.cancel()
    await asyncio.gather(*loops, return_exceptions=True)
    for conn in conns:
        conn.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "agents": a.agents, "slots_per_agent": a.slots, "expect": a.expect, "starts": tally.starts,
        "kills": tally.kills, "bad_slot_ids": tally.bad_slots, "per_agent": tally.per_agent,
        "first_hello": tally.first_hello, "first_start": tally.first_start,
        "timed_out": tally.starts < tally.expect, "cpu_s": usage.ru_utime + usage.ru_stime,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True, help="the master, http://host:port")
    ap.add_argument("--agents", type=int, default=5)
    ap.add_argument("--slots", type=int, default=10, help="CPU slots per agent")
    ap.add_argument("--expect", type=int, required=True, help="tasks to start before stopping")
    ap.add_argument("--idle", type=float, default=0.3, help="seconds without frames before stopping")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds before giving up")
    ap.add_argument("--id-prefix", default="bm4-agent")
    a = ap.parse_args()
    for name in ("agents", "slots", "expect"):
        if getattr(a, name) < 1:
            raise ValueError(f"--{name} must be >= 1, got {getattr(a, name)}")
    token = os.environ.get("DET_AGENT_TOKEN")
    if not token:
        raise ValueError("DET_AGENT_TOKEN must hold the master's agent token")
    print(json.dumps(asyncio.run(run(a, token))), flush=True)


if __name__ == "__main__":
    sys.exit(main())
