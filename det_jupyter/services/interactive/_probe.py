"""HTTP looks at a task's server through its own address: a JSON GET and a TCP connect."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPClientError


async def get_json(row: Any, token: str, path: str, timeout: float = 5.0) -> Any:
    """GET the notebook server's ``/proxy/<id>/<path>`` with its ``token``; None on any
    failure."""
    url = f"http://{row.proxy_address}/proxy/{row.task_id}/{path}"
    try:
        resp = await AsyncHTTPClient().fetch(
            url, headers={"Authorization": f"token {token}"},
            request_timeout=timeout, connect_timeout=timeout)
        return json.loads(resp.body)
    except (HTTPClientError, OSError, ValueError, asyncio.TimeoutError):
        return None


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

