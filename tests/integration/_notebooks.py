"""Helpers for notebook tests: launch one, wait for it, talk to its kernels through the proxy."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from tornado import httpclient, websocket

from tests._master import Client, wait_for


def launch(client: Client, **config: Any) -> str:
    return client.post("/api/v1/notebooks", {"config": config})["notebook"]["id"]


def state(client: Client, nb_id: str) -> str:
    return client.get(f"/api/v1/notebooks/{nb_id}")["notebook"]["state"]


def wait_running(client: Client, nb_id: str, timeout: float = 90) -> None:
    wait_for(lambda: state(client, nb_id) == "STATE_RUNNING", timeout=timeout,
             what=f"notebook {nb_id} running")


def proxy_origin(client: Client, task_id: str, kind: str = "notebook") -> str:
    """The proxy's own origin (``scheme://host:port``), from the task's ``proxyUrl``: the
    master serves ``/proxy/`` there, not on its own origin (reliability P4)."""
    url = client.get(f"/api/v1/{kind}s/{task_id}")[kind]["proxyUrl"]
    origin, sep, _ = url.partition("/proxy/")
    assert sep and origin.startswith("http://"), url
    return origin


def proxy_client(client: Client, task_id: str, kind: str = "notebook") -> Client:
    """``client``'s credentials, on the proxy's origin."""
    return Client(proxy_origin(client, task_id, kind), client.token)


def start_kernel(client: Client, nb_id: str) -> str:
    return proxy_client(client, nb_id).post(f"/proxy/{nb_id}/api/kernels", {"name": "python3"})["id"]


def ws_url(base: str, nb_id: str, kernel_id: str) -> str:
    return (base.replace("http://", "ws://") +
            f"/proxy/{nb_id}/api/kernels/{kernel_id}/channels?session_id={uuid.uuid4().hex}")


def execute_request(code: str) -> dict:
    msg_id = uuid.uuid4().hex
    return {"header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "t",
                       "session": uuid.uuid4().hex, "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": code, "silent": False, "store_history": False,
                        "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}


async def run_cell(url: str, headers: dict[str, str], code: str, timeout: float = 60) -> str:
    """Execute ``code`` over the kernel's websocket (JSON messages, no subprotocol); return its
    stdout once the kernel is idle again."""
    conn = await websocket.websocket_connect(httpclient.HTTPRequest(url, headers=headers))
    request = execute_request(code)
    await conn.write_message(json.dumps(request))
    out: list[str] = []

    async def replies() -> str:
        while True:
            raw = await conn.read_message()
            if raw is None:
                raise RuntimeError("the kernel websocket closed")
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != request["header"]["msg_id"]:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return "".join(out)

    try:
        return await asyncio.wait_for(replies(), timeout)
    finally:
        conn.close()


async def ws_status(url: str, headers: dict[str, str]) -> int:
    """The HTTP status a websocket upgrade gets (101 when it is accepted)."""
    try:
        conn = await websocket.websocket_connect(httpclient.HTTPRequest(url, headers=headers))
    except httpclient.HTTPClientError as exc:
        return exc.code
    conn.close()
    return 101
