"""``det shell tunnel ID``: this process's stdin/stdout ↔ the master's websocket tunnel to a
shell's SSH server. It is what the ``ProxyCommand`` of ``det shell open``'s ssh command runs, so
ssh speaks to the shell through the master and needs no network path to the agent."""

from __future__ import annotations

import asyncio
import os
import threading

from tornado import httpclient, websocket

from .common import CommandError

_CHUNK = 64 * 1024


def tunnel_url(master: str, task_id: str) -> str:
    """``http(s)://master`` → ``ws(s)://master/det-jupyter/tunnel/<id>``."""
    base = master.rstrip("/")
    scheme, sep, rest = base.partition("://")
    ws = {"http": "ws", "https": "wss"}.get(scheme.lower())
    if not sep or ws is None:
        raise CommandError(f"the master URL {master!r} is neither http:// nor https://")
    return f"{ws}://{rest}/det-jupyter/tunnel/{task_id}"


_REFUSED = {
    404: "shell {id} not found, or not yours (det shell list shows yours)",
    503: "shell {id} is not running yet (det shell list shows its state)",
    502: "shell {id} did not accept the connection; try again",
}


def run(master: str, task_id: str, token: str, in_fd: int = 0, out_fd: int = 1) -> int:
    """Relay until either side ends; 0 when the tunnel opened, CommandError when it did not."""
    return asyncio.run(_bridge(tunnel_url(master, task_id), task_id,
                               {"Authorization": f"Bearer {token}"}, in_fd, out_fd))


async def _bridge(url: str, task_id: str, headers: dict[str, str], in_fd: int, out_fd: int) -> int:
    request = httpclient.HTTPRequest(url, headers=headers, connect_timeout=30, request_timeout=30)
    try:
        conn = await websocket.websocket_connect(request, max_message_size=16 * _CHUNK)
    except httpclient.HTTPClientError as exc:
        message = _REFUSED.get(exc.code, f"the master refused the tunnel to shell {{id}} "
                                         f"(HTTP {exc.code})")
        raise CommandError(message.format(id=task_id)) from None
    except OSError as exc:
        raise CommandError(f"cannot reach the master's tunnel at {url}: {exc}") from None
    stream = getattr(conn, "stream", None)  # interactive: no Nagle delay on keystrokes
    if stream is not None:
        stream.set_nodelay(True)
    loop = asyncio.get_running_loop()
    stdin_done = asyncio.Event()

    async def send(data: bytes) -> None:
        await conn.write_message(data, binary=True)

    def read_stdin() -> None:
        # A thread, not a pipe transport: stdin may be a pipe, a socket, a tty or a file.
        try:
            while True:
                data = os.read(in_fd, _CHUNK)
                if not data:
                    break
                asyncio.run_coroutine_threadsafe(send(data), loop).result()
        except (OSError, websocket.WebSocketClosedError, RuntimeError):
            pass
        try:
            loop.call_soon_threadsafe(stdin_done.set)
        except RuntimeError:  # the loop is gone: the other side ended first
            pass

    async def write_stdout() -> None:
        while True:
            message = await conn.read_message()
            if message is None:
                return
            data = message.encode() if isinstance(message, str) else message
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(out_fd, view):]
            except OSError:  # ssh went away
                return

    threading.Thread(target=read_stdin, daemon=True).start()
    down = asyncio.ensure_future(write_stdout())
    up = asyncio.ensure_future(stdin_done.wait())
    try:
        await asyncio.wait({down, up}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        conn.close()
        for fut in (down, up):
            fut.cancel()
    return 0
