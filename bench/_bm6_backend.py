"""BM-6's loopback backend: 100 B and 1 MiB GET responses, a websocket echo, the
``api/status`` readiness probe and empty ``api/kernels|terminals|sessions``, under any path prefix (direct ``/small``, det-jupyter's
``/proxy/<id>/small``, jupyter-server-proxy's ``/small``).

    python _bm6_backend.py PORT

aiohttp when the interpreter has it (bench/.venv-jsp pins aiohttp==3.14.5), else tornado (the
--smoke run in the product venv). Standard library otherwise: it imports nothing of the repo.
"""

from __future__ import annotations

import sys

SMALL = b"x" * 100
BIG = b"y" * (1 << 20)
STATUS = b'{"started": "2026-01-01T00:00:00Z", "last_activity": "2026-01-01T00:00:00Z"}'
#: A Jupyter server with nothing open, for the idle culler's looks (BM-6's cull figures).
EMPTY_LISTS = ("/api/kernels", "/api/terminals", "/api/sessions")


def serve_aiohttp(port: int) -> None:
    from aiohttp import WSMsgType, web

    async def handle(request: web.Request) -> web.StreamResponse:
        path = request.path
        if path.endswith("/ws"):
            ws = web.WebSocketResponse(max_msg_size=0)
            await ws.prepare(request)
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    await ws.send_str(msg.data)
                elif msg.type == WSMsgType.BINARY:
                    await ws.send_bytes(msg.data)
            return ws
        if path.endswith("/api/status"):
            return web.Response(body=STATUS, content_type="application/json")
        if path.endswith(EMPTY_LISTS):
            return web.Response(body=b"[]", content_type="application/json")
        if path.endswith("/big"):
            return web.Response(body=BIG, content_type="application/octet-stream")
        return web.Response(body=SMALL, content_type="text/plain")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def serve_tornado(port: int) -> None:
    import asyncio

    from tornado import web, websocket

    class Echo(websocket.WebSocketHandler):
        def check_origin(self, origin: str) -> bool:
            return True

        def on_message(self, message: str | bytes) -> None:
            self.write_message(message, binary=isinstance(message, bytes))

    class Plain(web.RequestHandler):
        def get(self, path: str) -> None:
            if path.endswith("api/status") or path.endswith(EMPTY_LISTS):
                self.set_header("Content-Type", "application/json")
                self.finish(STATUS if path.endswith("api/status") else b"[]")
            else:
                self.finish(BIG if path.endswith("big") else SMALL)

    async def main() -> None:
        web.Application([(r"/(?:.*/)?ws", Echo), (r"/(.*)", Plain)]).listen(port, "127.0.0.1")
        await asyncio.Event().wait()

    asyncio.run(main())


if __name__ == "__main__":
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        serve_tornado(int(sys.argv[1]))
    else:
        serve_aiohttp(int(sys.argv[1]))
