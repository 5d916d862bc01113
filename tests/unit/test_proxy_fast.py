"""The proxy's fast path (``_proxy_fast.ProxyDelegate``), in one process: a real tornado server
with the delegate in front of a stand-in application, a real upstream that echoes what it got,
and a stand-in for the master's credential checks. What reaches the upstream and what comes
back, and which requests are left to the application (which the real master's tests, in
tests/integration/test_notebooks.py and test_proxy_origin.py, cover end to end)."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest
from tornado import httpclient, httpserver, netutil, web

from det_jupyter.errors import NotFound
from det_jupyter.server_ext._proxy import close_upstreams
from det_jupyter.server_ext._proxy_fast import ProxyDelegate
from det_jupyter.services.interactive.notebooks import Target

USER = SimpleNamespace(id=7, admin=False)


class _Echo(web.RequestHandler):
    def _echo(self) -> None:
        self.add_header("Set-Cookie", "a=1; Path=/")
        self.add_header("Set-Cookie", "b=2; Path=/")
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"method": self.request.method, "uri": self.request.uri,
                                "headers": dict(self.request.headers.get_all()),
                                "body": self.request.body.decode()}))

    get = post = put = delete = _echo  # type: ignore[assignment]

    def head(self) -> None:
        self.set_header("Content-Length", "5")
        self.finish()


class _Chunked(web.RequestHandler):
    async def get(self) -> None:
        for part in (b"one,", b"two,", b"three"):
            self.write(part)
            await self.flush()


class _Big(web.RequestHandler):
    def get(self) -> None:
        self.finish(bytes(range(256)) * 1024)  # 256 KiB with its Content-Length: streamed


class _App(web.RequestHandler):
    """The application's answer: whatever the fast path leaves to it."""

    def prepare(self) -> None:
        self.set_status(418)
        self.finish(f"app:{self.request.method}:{self.request.uri}")


class _Notebooks:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.touched_ids: list[str] = []

    def user_for_ticket(self, task_id: str, ticket: str) -> Any:
        return USER if (task_id, ticket) == ("nb1", "good-ticket") else None

    def route(self, user: Any, task_id: str) -> Target | None:
        if task_id == "other":
            raise NotFound("task other not found")
        return Target("nb1", self.upstream, "upstream-token", USER.id) if task_id == "nb1" else None

    def touched(self, task_id: str) -> None:
        self.touched_ids.append(task_id)


class _Auth:
    def user_for_token(self, token: str) -> Any:
        if token != "good-token":
            raise NotFound("no such session")
        return USER


def _listen(handler: Any) -> tuple[httpserver.HTTPServer, int]:
    sockets = netutil.bind_sockets(0, "127.0.0.1")
    server = httpserver.HTTPServer(handler)
    server.add_sockets(sockets)
    return server, sockets[0].getsockname()[1]


async def _world() -> tuple[str, _Notebooks, list[httpserver.HTTPServer]]:
    up, up_port = _listen(web.Application([(r"/proxy/nb1/chunked", _Chunked), (r"/proxy/nb1/big", _Big),
                                            (r"/proxy/nb1/.*", _Echo)]))
    notebooks = _Notebooks(f"127.0.0.1:{up_port}")
    master = SimpleNamespace(auth=_Auth(), notebooks=notebooks)
    app = web.Application([(r"/.*", _App)], det_master=master)
    proxy, port = _listen(ProxyDelegate(app))
    return f"http://127.0.0.1:{port}", notebooks, [up, proxy]


async def _fetch(url: str, **kw: Any) -> httpclient.HTTPResponse:
    return await httpclient.AsyncHTTPClient().fetch(url, raise_error=False, **kw)


def test_the_fast_path_forwards_with_the_notebook_token_and_returns_what_came_back() -> None:
    async def main() -> None:
        base, notebooks, servers = await _world()
        try:
            resp = await _fetch(f"{base}/proxy/nb1/api/x?q=1", method="POST", body=b"hello",
                                headers={"Cookie": "det_proxy=good-ticket; other=1",
                                         "X-Custom": "kept", "Authorization": "Bearer nope"})
            # A wrong bearer token is not the cookie's user: the application answers.
            assert resp.code == 418
            resp = await _fetch(f"{base}/proxy/nb1/api/x?q=1", method="POST", body=b"hello",
                                headers={"Cookie": "det_proxy=good-ticket; other=1", "X-Custom": "kept"})
            assert resp.code == 200, resp.body
            got = json.loads(resp.body)
            assert got["method"] == "POST" and got["uri"] == "/proxy/nb1/api/x?q=1" and got["body"] == "hello"
            assert got["headers"]["Authorization"] == "token upstream-token"
            assert got["headers"]["Cookie"] == "other=1"  # the proxy's own cookie stays here
            assert got["headers"]["X-Custom"] == "kept" and got["headers"]["X-Forwarded-Proto"] == "http"
            assert resp.headers.get_list("Set-Cookie") == ["a=1; Path=/", "b=2; Path=/"]
            assert int(resp.headers["Content-Length"]) == len(resp.body) and "Date" in resp.headers
            assert notebooks.touched_ids == ["nb1"]
            # A det session token works as well; chunked answers arrive whole; HEAD has no body.
            bearer = {"Authorization": "Bearer good-token"}
            resp = await _fetch(f"{base}/proxy/nb1/chunked", headers=bearer)
            assert (resp.code, resp.body) == (200, b"one,two,three")
            resp = await _fetch(f"{base}/proxy/nb1/anything", method="HEAD", headers=bearer)
            assert resp.code == 200 and resp.body == b"" and resp.headers["Content-Length"] == "5"
            resp = await _fetch(f"{base}/proxy/nb1/big", headers=bearer)
            assert resp.body == bytes(range(256)) * 1024 and resp.headers["Content-Length"] == str(256 * 1024)
        finally:
            for server in servers:
                server.stop()
            close_upstreams()

    asyncio.run(main())


@pytest.mark.parametrize("path, headers", [
    ("/proxy/nb1/x", {}),  # no credential
    ("/proxy/nb1/x", {"Cookie": "det_proxy=forged"}),
    ("/proxy/nb1/x", {"Authorization": "Bearer bad"}),
    ("/proxy/other/x", {"Authorization": "Bearer good-token"}),  # not the user's: NotFound
    ("/proxy/starting/x", {"Authorization": "Bearer good-token"}),  # no route yet
    ("/proxy/nb1/x?det_ticket=good-ticket", {}),  # a link's ticket: traded for a cookie there
    ("/proxy/nb1/../x", {"Authorization": "Bearer good-token"}),  # a forged path
    ("/proxy/nb1/%2e%2e/x", {"Authorization": "Bearer good-token"}),
    ("/proxy/nb1", {"Authorization": "Bearer good-token"}),  # the root redirect
    ("/api/kernels", {"Authorization": "Bearer good-token"}),  # not a proxy path
    ("/proxy/nb1/ws", {"Authorization": "Bearer good-token", "Upgrade": "websocket",
                       "Connection": "Upgrade"}),
])
def test_everything_else_is_left_to_the_application(path: str, headers: dict[str, str]) -> None:
    async def main() -> None:
        base, notebooks, servers = await _world()
        try:
            resp = await _fetch(f"{base}{path}", headers=headers)
            assert resp.code == 418, (resp.code, resp.body)
            assert resp.body.decode().startswith("app:GET:")
            assert notebooks.touched_ids == []
        finally:
            for server in servers:
                server.stop()
            close_upstreams()

    asyncio.run(main())


def test_an_upstream_that_does_not_answer_gets_the_applications_answer() -> None:
    """The request (its body included) is replayed to the application, which shows its
    waiting page; nothing was sent before."""
    async def main() -> None:
        base, notebooks, servers = await _world()
        dead = netutil.bind_sockets(0, "127.0.0.1")[0]
        notebooks.upstream = f"127.0.0.1:{dead.getsockname()[1]}"
        dead.close()  # nothing listens there now
        try:
            resp = await _fetch(f"{base}/proxy/nb1/api/x", method="PUT", body=b"{}",
                                headers={"Authorization": "Bearer good-token"})
            assert resp.code == 418 and resp.body == b"app:PUT:/proxy/nb1/api/x"
        finally:
            for server in servers:
                server.stop()
            close_upstreams()

    asyncio.run(main())
