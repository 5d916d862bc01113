"""The proxy's own origin: a second listening port that serves ``/proxy/{taskId}/…`` and
nothing else, and the master origin's ``/proxy/…``, which only sends browsers there.

Why (reliability P4): a notebook's or TensorBoard's pages are user-authored HTML and script.
On the master's origin that script would be same-origin with the master's Jupyter API and
``/det-jupyter/session``; on an origin of its own it is not (see ``services.interactive.origins``).

On the master's origin a request for ``/proxy/{id}/<path>?<query>`` that the proxy would let
through is answered ``307`` to the same path and query (the ``det_ticket`` included) on the
proxy's origin, named by the hostname the request used with the proxy's port; anyone else gets
the proxy's 404. A malformed ``Host`` gets 400 (nothing but a validated hostname reaches the
``Location``). Websocket upgrades there get 404: clients connect to the proxy's origin.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from typing import Any
from urllib.parse import urlencode

from tornado import httpserver, netutil, web

from ..errors import NotFound
from ..services.interactive.origins import ProxyOrigin, default_hostname, request_hostname
from ._proxy import COOKIE, TICKET_PARAM, ProxyHandler, ProxyRootHandler, bad_path, close_upstreams
from ._proxy_fast import ProxyDelegate

log = logging.getLogger("det_jupyter.proxy")

#: Settings of the master's web app the proxy's handlers read (copied when present).
_SHARED_SETTINGS = ("det_master", "websocket_max_message_size", "websocket_ping_interval",
                    "websocket_ping_timeout", "log_function")


class MasterProxyHandler(ProxyHandler):
    """``/proxy/{id}/…`` on the master's origin: 307 to the same path on the proxy's origin
    for whoever the proxy would let in; 404 for anyone else and for every websocket upgrade."""

    async def get(self, task_id: str, path: str = "") -> None:  # type: ignore[override]
        if self.request.headers.get("Upgrade", "").lower() == "websocket":
            self._not_found()  # never upgraded here: the proxy's origin serves websockets
            return
        await self._proxy(task_id, path)

    async def _proxy(self, task_id: str, path: str = "") -> None:
        if self._sign_in_first():
            return
        try:
            self._authorize(task_id)  # the proxy's own check: a redirect reveals nothing more
        except NotFound:
            self._not_found()
            return
        origin: ProxyOrigin | None = self.master.notebooks.proxy_origin
        if origin is None:
            self._error(503, "the proxy is not listening (the server is starting or stopping); "
                             "try again in a moment")
            return
        hostname = request_hostname(self.request.headers.get("Host"))
        if hostname is None:
            self._error(400, "the request's Host header is not a valid host[:port]")
            return
        self.set_header("Cache-Control", "no-store")
        self.set_header("Referrer-Policy", "no-referrer")
        self.redirect(origin_location(origin, hostname, self._tail()), status=307)

    def _sign_in_first(self) -> bool:
        """A browser's GET with no credential at all, where the master serves a JupyterHub:
        sent to sign in through the hub, and back here with the task's ticket
        (``_hub_oauth``). Whether it was sent (the same for every task id, so it reveals
        nothing)."""
        if getattr(self.master, "hub_auth", None) is None or self.request.method != "GET":
            return False
        if (self.request.headers.get("Authorization") or self.get_query_argument(TICKET_PARAM, None)
                or self.get_cookie(COOKIE)):
            return False
        base = self.settings.get("base_url", "/")
        self.set_header("Cache-Control", "no-store")
        self.redirect(f"{base}det-jupyter/hub/login?{urlencode({'next': base.rstrip('/') + self._tail()})}")
        return True

    def _tail(self) -> str:
        """The raw path from ``/proxy/`` on (below the server's base_url), and the query."""
        raw = self.request.path
        base = self.settings.get("base_url", "/")
        tail = raw[len(base) - 1:] if raw.startswith(base) else raw
        return tail + (f"?{self.request.query}" if self.request.query else "")

    def _error(self, status: int, message: str) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": message, "code": status}))

    post = put = patch = delete = head = options = _proxy  # type: ignore[assignment]


def origin_location(origin: ProxyOrigin, hostname: str, tail: str) -> str:
    """``<scheme>://<hostname>:<port><tail>``; ``tail`` must be a path below ``/proxy/``
    (so the host cannot be changed by it)."""
    if not tail.startswith("/proxy/") or bad_path(tail.split("?", 1)[0]):
        raise ValueError(f"not a proxy path: {tail[:80]!r}")
    return f"{origin.scheme}://{hostname}:{origin.port}{tail}"


#: The proxy origin's whole route table.
PROXY_ROUTES: list[tuple[str, Any]] = [
    (r"/proxy/([^/]+)/(.*)", ProxyHandler),
    (r"/proxy/([^/]+)", ProxyRootHandler),
]


class _NotHere(web.RequestHandler):
    """Anything but ``/proxy/…`` on the proxy's origin: 404 (the master's API is not here)."""

    def prepare(self) -> None:
        self.set_status(404)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": "not found: this port serves /proxy/<task id>/ only",
                                "code": 404}))


def proxy_application(master_settings: dict[str, Any]) -> web.Application:
    """A tornado app with the proxy's routes only, and the settings they read."""
    settings = {k: master_settings[k] for k in _SHARED_SETTINGS if k in master_settings}
    # Proxied traffic is the notebook's own: only failures go to the master's access log
    # (formatting a line per proxied request cost about a tenth of the request). A waiting page
    # (queued, starting, stopping, ended) is not one: a browser tab on a notebook that starts
    # asks for it every 2 s, and Jupyter's log logs a 503 as an error with the request's headers.
    master_log = settings.get("log_function")
    if master_log is not None:
        def log_failures(handler: web.RequestHandler) -> None:
            if handler.get_status() >= 400 and not getattr(handler, "waiting_page", False):
                master_log(handler)
        settings["log_function"] = log_failures
    # Tickets in query strings are credentials: never in the access log.
    settings["extra_log_scrub_param_keys"] = ["ticket"]
    settings["default_handler_class"] = _NotHere
    return web.Application(PROXY_ROUTES, **settings)


class ProxyServer:
    """The proxy's listening socket(s) and HTTP server. ``bind`` happens at configuration time
    (a port in use stops the server with a message, as Jupyter's own port does); ``start``
    once the event loop runs; ``stop`` at shutdown."""

    def __init__(self, ip: str, port: int, ssl_options: Any = None) -> None:
        self.ip = ip
        self.requested_port = port
        self.ssl_options = ssl_options
        self._sockets: list[socket.socket] = []
        self._server: httpserver.HTTPServer | None = None

    def bind(self) -> ProxyOrigin:
        """Listen (port 0: a free one); the proxy's origin. OSError when the port is taken."""
        self._sockets = netutil.bind_sockets(self.requested_port, self.ip or None)
        port = self._sockets[0].getsockname()[1]
        scheme = "https" if self.ssl_options else "http"
        return ProxyOrigin(scheme, default_hostname(self.ip), port)

    def start(self, app: web.Application, **server_kw: Any) -> None:
        """Serve ``app`` behind the proxy's fast path (``_proxy_fast.ProxyDelegate``)."""
        self._server = httpserver.HTTPServer(ProxyDelegate(app), ssl_options=self.ssl_options, **server_kw)
        self._server.add_sockets(self._sockets)

    async def stop(self) -> None:
        if self._server is None:
            for sock in self._sockets:
                sock.close()
            self._sockets = []
            return
        server, self._server = self._server, None
        server.stop()
        with contextlib.suppress(asyncio.TimeoutError, Exception):
            await asyncio.wait_for(server.close_all_connections(), 5)
        with contextlib.suppress(Exception):
            close_upstreams()
