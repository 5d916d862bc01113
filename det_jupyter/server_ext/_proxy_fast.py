"""The proxy's fast path: plain HTTP requests to a ready notebook, forwarded below tornado's
``RequestHandler``.

Most of what crosses the proxy is a notebook's own traffic: small GETs and POSTs of a user
who holds the notebook's cookie (or a det token), to a notebook that answers. For those, the
web application's machinery (routing, a handler object, its headers and cookies, the access
log line) cost about as much as the forwarding itself. ``ProxyDelegate`` sits in front of the
proxy origin's application: when a request's headers show the fast case, it forwards the
request itself through the same pooled upstream client and streams the answer back on the
connection; anything else (a websocket upgrade, a ``det_ticket`` link, no credential or a
foreign one, a task that is not ready, a forged path, a notebook that does not answer) goes
to the application, unchanged, so every refusal and waiting page is the application's.

The checks are the application's fast path's (``ProxyHandler._proxy``): ``request_user``, then
``NotebookService.route`` (its owner or an admin); the upstream request and the answer's
headers are made by the same helpers (``upstream``, ``upstream_headers``, ``answer_headers``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from tornado import httputil, iostream, web

from ..errors import DetError
from ..services.interactive.notebooks import Target
from ._proxy import (
    COOKIE,
    TICKET_PARAM,
    answer_headers,
    bad_path,
    request_user,
    upstream,
    upstream_headers,
)

log = logging.getLogger("det_jupyter.proxy")

_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}


class ProxyDelegate(httputil.HTTPServerConnectionDelegate):
    """The proxy origin's server delegate: the fast path, else the application."""

    def __init__(self, app: web.Application) -> None:
        self.app = app

    def start_request(self, server_conn: object,
                      request_conn: httputil.HTTPConnection) -> httputil.HTTPMessageDelegate:
        return _Request(self, server_conn, request_conn)

    def on_close(self, server_conn: object) -> None:
        self.app.on_close(server_conn)


class _Request(httputil.HTTPMessageDelegate):
    def __init__(self, owner: ProxyDelegate, server_conn: object,
                 conn: httputil.HTTPConnection) -> None:
        self._owner = owner
        self._server_conn = server_conn
        self._conn = conn
        self._app: httputil.HTTPMessageDelegate | None = None  # the application's, once handed over
        self._start: httputil.RequestStartLine | None = None
        self._headers: httputil.HTTPHeaders | None = None
        self._body: list[bytes] = []
        self._target: Target | None = None

    # -- the message ----------------------------------------------------------------------

    def headers_received(self, start_line: httputil.RequestStartLine | httputil.ResponseStartLine,
                         headers: httputil.HTTPHeaders) -> Any:
        assert isinstance(start_line, httputil.RequestStartLine)
        self._start, self._headers = start_line, headers
        self._target = self._fast_target(start_line, headers)
        if self._target is None:
            return self._hand_over().headers_received(start_line, headers)
        return None

    def data_received(self, chunk: bytes) -> Any:
        if self._app is not None:
            return self._app.data_received(chunk)
        self._body.append(chunk)
        return None

    def finish(self) -> None:
        if self._app is not None:
            self._app.finish()
            return
        asyncio.ensure_future(self._forward_or_close())

    def on_connection_close(self) -> None:
        if self._app is not None:
            self._app.on_connection_close()

    # -- the fast case --------------------------------------------------------------------

    def _master(self) -> Any:
        return self._owner.app.settings["det_master"]

    def _fast_target(self, start: httputil.RequestStartLine, headers: httputil.HTTPHeaders) -> Target | None:
        """The route, when this request is the fast case; None hands it to the application."""
        if start.method not in _METHODS or start.version != "HTTP/1.1" or "Upgrade" in headers:
            return None
        path, _, query = start.path.partition("?")
        if not path.startswith("/proxy/") or TICKET_PARAM in query or bad_path(path):
            return None
        task_id, slash, _ = path[len("/proxy/"):].partition("/")
        if not slash or not task_id:
            return None
        master = self._master()
        ticket = httputil.parse_cookie(headers.get("Cookie", "")).get(COOKIE)
        try:
            user = request_user(master, task_id, headers.get("Authorization", ""), ticket)
            return master.notebooks.route(user, task_id) if user is not None else None
        except DetError:
            return None  # the application answers (its 404)

    async def _forward_or_close(self) -> None:
        try:
            await self._forward()
        except Exception:  # never leave the connection waiting on an answer
            log.exception("proxying a request failed")
            self._conn.close()  # type: ignore[attr-defined]

    async def _forward(self) -> None:
        assert self._start is not None and self._headers is not None and self._target is not None
        target, method = self._target, self._start.method
        body = b"".join(self._body) if method not in ("GET", "HEAD") else None
        protocol = getattr(self._conn.context, "protocol", "http")  # type: ignore[attr-defined]
        self._master().notebooks.touched(target.task_id)
        sent = False
        try:
            async with await upstream().request(target.address, method, self._start.path,
                                                upstream_headers(self._headers, protocol, target),
                                                body) as answer:
                headers = httputil.HTTPHeaders()
                for name, value in answer_headers(answer.headers, keep_length=True):
                    headers.add(name, value)
                headers["Date"] = httputil.format_timestamp(time.time())
                sent = True
                # A small body of known length, read with the head, goes out with it in one
                # write; any other is streamed as it comes (none for HEAD, 204 and 304).
                self._conn.write_headers(httputil.ResponseStartLine("HTTP/1.1", answer.status, answer.reason),
                                         headers, answer.body or None)
                if answer.body is None:
                    async for chunk in answer.chunks():
                        await self._conn.write(chunk)
        except iostream.StreamClosedError:
            return  # the client went away
        except OSError as exc:  # the notebook's failures (UpstreamError)
            log.info("proxy to %s failed: %s", target.task_id, exc)
            if sent:
                self._conn.close()  # type: ignore[attr-defined]  # part of an answer: cut it off
            else:
                self._replay()  # the application's waiting page
            return
        self._conn.finish()

    # -- everything else: the application ---------------------------------------------------

    def _hand_over(self) -> httputil.HTTPMessageDelegate:
        self._app = self._owner.app.start_request(self._server_conn, self._conn)
        return self._app

    def _replay(self) -> None:
        """The upstream failed before anything was sent: the application answers the
        request as it would have (its waiting page), from the headers and body kept."""
        assert self._start is not None and self._headers is not None
        app = self._hand_over()
        app.headers_received(self._start, self._headers)
        for chunk in self._body:
            app.data_received(chunk)
        app.finish()
