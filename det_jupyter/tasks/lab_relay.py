"""The det side of a Jupyter server that runs as a det task (a ``det notebook``, a JupyterHub
user's server): the JupyterLab sidebar and dashboard work there with no login, as the task's
owner. Loaded by Jupyter instead of the master when ``DET_TASK_TYPE`` is set
(``det_jupyter._jupyter_server_extension_points``).

- ``POST <base>/det-jupyter/session`` (Jupyter-authenticated, as on the master): the task's own
  user token (``DET_USER_TOKEN``) and owner, for the page. Whoever may use this Jupyter server
  already runs code as that user; nobody else gets it.
- ``<base>/api/v1/…``: relayed to the master (``DET_MASTER``) with the request's own
  ``Authorization`` and nothing added, so it grants nothing the caller does not hold; the
  answer streams back as it comes (log follows). Jupyter's own ``/api/…`` routes are not
  under ``/api/v1/``.
- ``<base>/det-jupyter/chart.js``: the widgets' chart module, from this installation.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import httputil, web
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

CHART_MODULE = Path(__file__).resolve().parent.parent / "widgets" / "static" / "chart.js"
#: What is relayed from the request, and back from the master's answer.
REQUEST_HEADERS = ("Authorization", "Content-Type", "Accept")
RESPONSE_HEADERS = ("Content-Type", "Cache-Control", "Content-Disposition")
_DOTS = re.compile(r"(^|/)(\.|%2e){1,2}(/|$)", re.IGNORECASE)


def _master() -> str:
    url = (os.environ.get("DET_MASTER") or "").strip().rstrip("/")
    return url if "://" in url or not url else "http://" + url


class TaskSessionHandler(APIHandler):
    """``POST /det-jupyter/session``: the task owner's det token, for this server's users."""

    @web.authenticated
    def post(self) -> None:
        token, owner = os.environ.get("DET_USER_TOKEN"), os.environ.get("DET_USER")
        if not token or not owner:
            raise web.HTTPError(404, "this task has no det user token")
        self.set_header("Cache-Control", "no-store")
        self.finish({"token": token, "username": owner})


class ChartModuleHandler(JupyterHandler):
    """``GET /det-jupyter/chart.js``."""

    @web.authenticated
    def get(self) -> None:
        self.set_header("Content-Type", "text/javascript; charset=utf-8")
        self.set_header("Cache-Control", "no-cache")
        self.finish(CHART_MODULE.read_bytes())


class RelayHandler(web.RequestHandler):
    """``/api/v1/…`` on to the master. Not Jupyter-authenticated on purpose: the master checks
    the det credential the request carries (det routes never use cookies), and the relay adds
    none."""

    SUPPORTED_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")

    def check_xsrf_cookie(self) -> None:
        return None

    def compute_etag(self) -> None:
        return None

    async def _relay(self, path: str) -> None:
        master = _master()
        if not master:
            raise web.HTTPError(503, "DET_MASTER is not set in this task")
        if _DOTS.search(path):
            raise web.HTTPError(404)
        url = f"{master}/api/v1/{path}" + (f"?{self.request.query}" if self.request.query else "")
        headers = {h: self.request.headers[h] for h in REQUEST_HEADERS if h in self.request.headers}
        body = self.request.body if self.request.method in ("POST", "PUT", "PATCH") else None

        def on_header(line: str) -> None:
            if line.startswith("HTTP/"):
                self.set_status(httputil.parse_response_start_line(line.strip()).code)
                return
            name, _, value = line.partition(":")
            if name.strip().title() in RESPONSE_HEADERS:
                self.set_header(name.strip(), value.strip())

        def on_chunk(chunk: bytes) -> None:
            self.write(chunk)
            self.flush()

        request = HTTPRequest(url, method=self.request.method or "GET", headers=headers, body=body,
                              allow_nonstandard_methods=True, follow_redirects=False,
                              header_callback=on_header, streaming_callback=on_chunk,
                              connect_timeout=10, request_timeout=3600)
        response = await AsyncHTTPClient().fetch(request, raise_error=False)
        if response.code == 599:  # no answer at all
            self.clear()
            self.set_status(502)
            self.finish({"message": f"cannot reach the det master at {master} ({response.error})"})
            return
        self.finish()

    get = post = put = patch = delete = _relay


def _load_jupyter_server_extension(serverapp: Any) -> None:
    base = serverapp.web_app.settings.get("base_url", "/")
    serverapp.web_app.add_handlers(".*$", [
        (url_path_join(base, "det-jupyter/session"), TaskSessionHandler),
        (url_path_join(base, r"det-jupyter/chart\.js"), ChartModuleHandler),
        (url_path_join(base, "api/v1/(.*)"), RelayHandler),
    ])
    serverapp.log.info("det-jupyter: this server is a det task of %s; det's API is relayed to %s",
                       os.environ.get("DET_USER", "?"), _master() or "(no DET_MASTER)")
