"""Where the agent connects, and how a frame becomes websocket text.

The frames themselves are the records of :mod:`det_agent.wire`. Frames that go through the
outbox (``task_started``, ``logs``, ``task_exited``) carry an ``id`` the outbox gives them;
the master answers an ``ack`` once it has handled (stored) every frame up to that id, and the
agent sends what was not acknowledged again after a reconnect.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any


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


def encode(frame: dict[str, Any]) -> str:
    """One frame as websocket text."""
    return json.dumps(frame, separators=(",", ":"))
