"""``/proxy/{taskId}/…``: the master's reverse proxy to a notebook, HTTP and websockets.

Where it is served: on an origin of its own (``DetJupyterApp.proxy_port``, see
``proxy_server``), never on the master's, so a proxied page's script is not same-origin with
the master's API (reliability P4). The master's own ``/proxy/…`` only redirects there.

Who gets through: the notebook's owner (or an admin), authenticated by a det session token
(``Authorization: Bearer``) or by the notebook's ticket — the ``det_ticket`` query parameter of
the link ``det notebook open`` prints, traded at once (by the proxy's origin only) for an
HttpOnly, SameSite=Lax cookie scoped to this notebook's path. Anyone else, with any other credential or none, gets the same 404 as
for a notebook that does not exist.

Where it goes: only ``http://<the notebook's own host:port>/proxy/<taskId>/<path>``, the address
the master recorded when it placed the notebook (never one taken from the request), with the
notebook's upstream token, which users never see. Paths with ``.``/``..`` segments (raw or
percent-encoded) are refused. A notebook that is queued or starting gets a waiting page that
says why, and refreshes itself, instead of a hang.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode

from tornado import httpclient, httputil, web, websocket

from ..errors import DetError, NotFound
from ..services.access.authz import Perm
from ..services.accounts.auth import User
from ..services.interactive.notebooks import Target
from ._upstream import Upstream

log = logging.getLogger("det_jupyter.proxy")

COOKIE = "det_proxy"
TICKET_PARAM = "det_ticket"
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
              "trailer", "transfer-encoding", "upgrade", "host", "content-length",
              "authorization", "cookie", "sec-websocket-key", "sec-websocket-version",
              "sec-websocket-extensions", "sec-websocket-protocol", "origin"}
RESPONSE_SKIP = {"connection", "keep-alive", "transfer-encoding", "content-length", "server", "date"}
_NOT_FOUND = "notebook not found; det notebook list shows yours"
_CSP = "default-src 'none'; style-src 'unsafe-inline'"


_UPSTREAMS: dict[int, Upstream] = {}


def upstream() -> Upstream:
    """The pooled upstream client of the running event loop: connections to each notebook are
    kept alive and reused, so a proxied request costs about one localhost hop."""
    loop = id(asyncio.get_running_loop())
    client = _UPSTREAMS.get(loop)
    if client is None:
        client = _UPSTREAMS[loop] = Upstream()
    return client


def close_upstreams() -> None:
    """Close the pooled upstream connections (at shutdown)."""
    clients = list(_UPSTREAMS.values())
    _UPSTREAMS.clear()
    for client in clients:
        client.close()


def upstream_headers(headers: httputil.HTTPHeaders, protocol: str, target: Target) -> list[tuple[str, str]]:
    """A request's headers as the notebook gets them: hop-by-hop headers and the user's
    credentials dropped (the proxy's cookie too, the others kept), the notebook's own token."""
    out = [(k, v) for k, v in headers.get_all() if k.lower() not in HOP_BY_HOP]
    cookies = [f"{name}={value}" for name, value in httputil.parse_cookie(headers.get("Cookie", "")).items()
               if name != COOKIE]
    if cookies:
        out.append(("Cookie", "; ".join(cookies)))
    out += [("Authorization", f"token {target.token}"), ("X-Forwarded-Proto", protocol)]
    return out


def answer_headers(headers: Iterable[tuple[str, str]], *, keep_length: bool) -> list[tuple[str, str]]:
    """The notebook's answer's headers to pass on: framing and server headers dropped, every
    Set-Cookie and the Content-Encoding kept; the Content-Length too with ``keep_length``
    (the body is streamed as it came, not framed again)."""
    return [(name, value) for name, value in headers if name.lower() not in RESPONSE_SKIP
            or (keep_length and name.lower() == "content-length")]


def bad_path(raw_path: str) -> bool:
    """Whether a request path (raw, as sent) has a ``.`` or ``..`` segment, however encoded."""
    path = raw_path
    for _ in range(3):  # %252e%252e decodes twice
        decoded = unquote(path)
        if decoded == path:
            break
        path = decoded
    return any(seg in (".", "..") for seg in path.replace("\\", "/").split("/"))


def request_user(master: Any, task_id: str, authorization: str, ticket: str | None) -> User | None:
    """Who a proxied request comes from: its bearer det token, else the task's ticket (a
    ``det_ticket`` link or the proxy's cookie); None when neither names a user. Both of the
    proxy's paths ask this, so they let in the same people."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        try:
            return master.auth.user_for_token(token.strip())
        except DetError:
            return None
    if ticket:
        return master.notebooks.user_for_ticket(task_id, ticket)
    return None


class ProxyHandler(websocket.WebSocketHandler):
    """HTTP verbs are forwarded as they are; a GET asking for a websocket upgrade is bridged
    to a websocket of the notebook's. Who gets in: the task's owner (or an admin) holding
    UPDATE_NSC on its workspace (``NotebookService.visible``); anyone else gets 404."""

    permissions = {m: Perm.UPDATE_NSC for m in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")}
    #: Answered with the waiting page: a state the notebook is in, not a failure (not logged).
    waiting_page = False

    @property
    def master(self) -> Any:
        return self.settings["det_master"]

    def check_xsrf_cookie(self) -> None:
        """Upstream is called with its token, not cookies; our cookie is SameSite=Lax, so a
        cross-site POST arrives without it and gets a 404."""
        return None

    def compute_etag(self) -> None:
        return None

    # -- who ----------------------------------------------------------------------------

    def _user(self, task_id: str) -> User | None:
        ticket = self.get_query_argument(TICKET_PARAM, None) or self.get_cookie(COOKIE)
        return request_user(self.master, task_id, self.request.headers.get("Authorization", ""), ticket)

    def _authorize(self, task_id: str) -> Any:
        """The task's row; NotFound for anything short of its owner or an admin."""
        if bad_path(self.request.path):
            raise NotFound(_NOT_FOUND)
        user = self._user(task_id)
        if user is None:
            raise NotFound(_NOT_FOUND)
        try:
            return self.master.notebooks.visible(user, task_id, None)
        except DetError:
            raise NotFound(_NOT_FOUND) from None

    def _upstream_path(self, target: Target) -> str:
        """The path and query the notebook gets: the request's, less a ``det_ticket``."""
        prefix = f"/proxy/{target.task_id}/"
        raw = self.request.path
        rest = raw[len(prefix):] if raw.startswith(prefix) else ""
        query = [(k, v) for k, v in parse_qsl(self.request.query, keep_blank_values=True)
                 if k != TICKET_PARAM]
        return f"{prefix}{rest}?{urlencode(query)}" if query else f"{prefix}{rest}"

    def _upstream_headers(self, target: Target) -> list[tuple[str, str]]:
        return upstream_headers(self.request.headers, self.request.protocol, target)

    # -- HTTP ---------------------------------------------------------------------------

    async def _proxy(self, task_id: str, path: str = "") -> None:
        if bad_path(self.request.path):
            self._not_found()
            return
        user = self._user(task_id)
        target = None
        if user is not None:
            try:  # the fast path: a ready task's route, from memory
                target = self.master.notebooks.route(user, task_id)
            except DetError:
                self._not_found()
                return
        ticket = self.get_query_argument(TICKET_PARAM, None)
        if target is None or (ticket and self.request.method == "GET"):
            try:
                row = self._authorize(task_id)
            except NotFound:
                self._not_found()
                return
            if ticket and self.request.method == "GET":
                # Trade the link's ticket for a cookie of this task's path, and drop it from
                # the address bar.
                self.set_cookie(COOKIE, ticket, path=f"/proxy/{task_id}/", httponly=True,
                                samesite="Lax", expires_days=7)
                query = [(k, v) for k, v in parse_qsl(self.request.query, keep_blank_values=True)
                         if k != TICKET_PARAM]
                self.redirect(self.request.path + (f"?{urlencode(query)}" if query else ""))
                return
            target = self.master.notebooks.target_of(row)
            if target is None:
                self._waiting(row)
                return
        self.master.notebooks.touched(task_id)
        await self._forward(target)

    async def _forward(self, target: Target) -> None:
        """Send the request upstream over a pooled keep-alive connection and stream the
        answer back as it comes."""
        method = self.request.method or "GET"
        body = self.request.body if method not in ("GET", "HEAD") else None
        try:
            async with await upstream().request(target.address, method, self._upstream_path(target),
                                                self._upstream_headers(target), body) as answer:
                self.set_status(answer.status, answer.reason)
                self._clear_representation_headers()
                for name, value in answer_headers(answer.headers, keep_length=False):
                    self.add_header(name, value)
                async for chunk in answer.chunks():  # none for HEAD, 204 and 304
                    self.write(chunk)
                    if len(chunk) >= 64 * 1024:
                        await self.flush()
        except OSError as exc:  # the notebook's failures (UpstreamError) and the client's
            if self._headers_written:
                raise
            log.info("proxy to %s failed: %s", target.task_id, exc)
            self.clear()
            row = self.master.commands.get(target.task_id, None)
            self._waiting(row, "It is not answering (it may be restarting or ending).")
            return
        self.finish()

    def _clear_representation_headers(self) -> None:
        for name in ("Content-Type", "Server"):
            self.clear_header(name)

    def _not_found(self) -> None:
        self.set_status(404)
        self.set_header("Content-Type", "application/json")
        self.set_header("Content-Security-Policy", _CSP)
        self.finish(json.dumps({"message": _NOT_FOUND, "code": 404}))

    def _waiting(self, row: Any, reason: str | None = None) -> None:
        """503 and a page that says why (queued behind X, starting) and refreshes itself."""

        def queue_reason(job_id: str) -> str | None:  # only asked while it is queued
            return self.master.job_queue.wait_reason(job_id, row.config)

        text = reason or self.master.notebooks.waiting(row, queue_reason)
        self.waiting_page = True
        ended = row.end_time is not None
        self.set_status(404 if ended else 503)
        self.set_header("Retry-After", "2")
        self.set_header("Content-Security-Policy", _CSP)
        accept = self.request.headers.get("Accept", "")
        if "text/html" not in accept:
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"message": text, "code": 404 if ended else 503}))
            return
        self.set_header("Content-Type", "text/html; charset=utf-8")
        refresh = "" if ended else '<meta http-equiv="refresh" content="2">'
        self.finish(f"<!doctype html><html><head><meta charset=\"utf-8\">{refresh}"
                    f"<title>det-jupyter</title></head><body style=\"font-family:"
                    f"sans-serif;margin:3em\"><h2>{html.escape(row.description)}</h2>"
                    f"<p>{html.escape(text)}</p></body></html>")

    async def get(self, task_id: str, path: str = "") -> None:  # type: ignore[override]
        if self.request.headers.get("Upgrade", "").lower() != "websocket":
            await self._proxy(task_id, path)
            return
        await self._open_websocket(task_id, path)

    post = put = patch = delete = head = options = _proxy  # type: ignore[assignment]

    # -- websockets ---------------------------------------------------------------------

    _upstream: Any = None

    async def _open_websocket(self, task_id: str, path: str) -> None:
        try:
            row = self._authorize(task_id)
        except NotFound:
            self._not_found()
            return
        target = self.master.notebooks.target_of(row)
        if target is None:
            self.set_status(503)
            self.finish(json.dumps({"message": "the notebook is not running yet", "code": 503}))
            return
        self.master.notebooks.touched(task_id)
        self._task_id = task_id
        offered = [p.strip() for p in self.request.headers.get("Sec-WebSocket-Protocol", "").split(",")
                   if p.strip()]
        request = httpclient.HTTPRequest(f"ws://{target.address}{self._upstream_path(target)}",
                                         headers=dict(self._upstream_headers(target)),
                                         connect_timeout=10, request_timeout=30)
        try:
            self._upstream = await websocket.websocket_connect(
                request, on_message_callback=self._from_upstream, subprotocols=offered or None,
                max_message_size=1024 * 1024 * 1024)
        except (OSError, httpclient.HTTPClientError, websocket.WebSocketError) as exc:
            log.info("proxy websocket to %s failed: %s", task_id, exc)
            self.set_status(502)
            self.finish(json.dumps({"message": "the notebook refused the connection", "code": 502}))
            return
        await super().get(task_id, path)

    def select_subprotocol(self, subprotocols: list[str]) -> str | None:
        chosen = getattr(self._upstream, "selected_subprotocol", None)
        return chosen if chosen in subprotocols else None

    def _from_upstream(self, message: str | bytes | None) -> None:
        if message is None:
            self.close()
            return
        try:
            self.write_message(message, binary=isinstance(message, bytes))
        except websocket.WebSocketClosedError:
            pass

    def on_message(self, message: str | bytes) -> None:
        self.master.notebooks.touched(self._task_id)
        if self._upstream is not None:
            self._upstream.write_message(message, binary=isinstance(message, bytes))

    def on_close(self) -> None:
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None


class ProxyRootHandler(web.RequestHandler):
    """``/proxy/{id}`` → ``/proxy/{id}/`` (the query string kept; it reveals nothing)."""

    public = True

    def get(self, task_id: str) -> None:
        query = f"?{self.request.query}" if self.request.query else ""
        self.redirect(f"{self.request.path}/{query}")
