"""Agent → master frames (docs/internals.md, "Master ↔ agent protocol"), as pure builders.

Frames that go through the outbox (``task_started``, ``logs``, ``task_exited``) carry an
``id`` the outbox gives them; the master answers ``{"type": "ack", "id": n}`` once it has
handled (stored) every frame up to ``n``, and the agent sends what was not acknowledged again
after a reconnect.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Sequence
from typing import Any

from ._devices import Slot
from ._stats import SlotStats
from .runtime import LogLine


def agents_url(master_url: str, agent_id: str) -> str:
    """``http(s)://host:port[/base]`` → ``ws(s)://host:port[/base]/agents?id=<agent_id>``."""
    parts = urllib.parse.urlsplit(master_url.rstrip("/"))
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise ValueError(
            f"master URL {master_url!r} must look like http://host:port or https://host:port"
        )
    query = urllib.parse.urlencode({"id": agent_id})
    return urllib.parse.urlunsplit((scheme, parts.netloc, parts.path + "/agents", query, ""))


def hello(
    agent_id: str,
    resource_pool: str,
    slots: Sequence[Slot],
    running: Sequence[str],
    version: str,
    address: str,
) -> dict[str, Any]:
    """The first frame after every connect.

    ``address`` is the host name or IP other containers reach this agent at (the master uses it
    for distributed rendezvous).
    """
    return {
        "type": "hello",
        "agent_id": agent_id,
        "resource_pool": resource_pool,
        "slots": [s.to_wire() for s in slots],
        "running": list(running),
        "version": version,
        "address": address,
    }


def slot_stats(stats: Sequence[SlotStats]) -> dict[str, Any]:
    """Current GPU figures per slot; sent only while connected, never replayed after an outage."""
    return {"type": "slot_stats", "slots": [s.to_wire() for s in stats]}


def task_started(allocation_id: str, pid: int) -> dict[str, Any]:
    """The entrypoint process was spawned."""
    return {"type": "task_started", "allocation_id": allocation_id, "pid": pid}


def logs(allocation_id: str, lines: Sequence[LogLine]) -> dict[str, Any]:
    """A batch of log lines, in order."""
    return {
        "type": "logs",
        "allocation_id": allocation_id,
        "lines": [line.to_wire() for line in lines],
    }


def task_exited(allocation_id: str, exit_code: int, reason: str | None) -> dict[str, Any]:
    """The task is gone and all its log lines were sent before this frame."""
    return {
        "type": "task_exited",
        "allocation_id": allocation_id,
        "exit_code": exit_code,
        "reason": reason,
    }


def leaving(timeout_s: float) -> dict[str, Any]:
    """The agent is stopping (a planned stop, e.g. SIGTERM): the master places nothing more on
    it and preempts its tasks; those still running after ``timeout_s`` seconds are killed.
    Their exits are preemptions, not failures. Sent again after every hello until it exits."""
    return {"type": "leaving", "timeout_s": timeout_s}


def encode(frame: dict[str, Any]) -> str:
    """One frame as websocket text."""
    return json.dumps(frame, separators=(",", ":"))
