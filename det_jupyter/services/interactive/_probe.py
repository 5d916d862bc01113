"""HTTP looks at a task's server through its own address: a JSON GET and a TCP connect."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPClientError


async def get_json(row: Any, token: str, path: str, timeout: float = 5.0) -> Any:
    """GET the notebook server's ``/proxy/<id>/<path>`` (a JupyterHub server's
    ``<its prefix><path>``) with ``token``; None on any failure."""
    prefix = hub_prefix_of(row) or f"/proxy/{row.task_id}/"
    url = f"http://{row.proxy_address}{prefix}{path}"
    try:
        resp = await AsyncHTTPClient().fetch(
            url, headers={"Authorization": f"token {token}"},
            request_timeout=timeout, connect_timeout=timeout)
        return json.loads(resp.body)
    except (HTTPClientError, OSError, ValueError, asyncio.TimeoutError):
        return None


def hub_prefix_of(row: Any) -> str | None:
    """A JupyterHub server's prefix (/user/<name>/), from a row with ``hub_prefix`` or
    ``config``; None for any other task."""
    prefix = getattr(row, "hub_prefix", None)
    if prefix is None:
        config = getattr(row, "config", None)
        prefix = config.get("hub_prefix") if isinstance(config, dict) else None
    return prefix or None


async def connects(address: str, timeout: float) -> bool:
    """Whether a TCP connection to ``host:port`` opens (a task that speaks no HTTP)."""
    host, _, port = address.rpartition(":")
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), timeout)
    except (OSError, ValueError, asyncio.TimeoutError):
        return False
    writer.close()
    return True


def epoch(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None

