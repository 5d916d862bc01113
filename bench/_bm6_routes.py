"""BM-6's route add/remove figures, on the real master: how soon the proxy routes to a notebook
once its server answers, and how soon it stops once the notebook is killed.

There is no route API to time (configurable-http-proxy's ``add_route`` is a REST call): the
master's proxy keeps its routes in memory, adds one when a placed task's readiness probe is
answered (placed tasks that do not answer yet are probed every ``PROBE_INTERVAL``), and drops
it inside the kill request. So, per repetition, with a fresh notebook whose recorded address is
a port nothing listens on yet (swapped before its first probe, as the main BM-6 run does):

- the bench starts a server there (in this process: ``/api/status`` and a 100 B body under any
  path) and polls ``/proxy/<id>/small`` through the proxy every half millisecond;
- ``route_add_ms``: from the server's answer to the master's readiness probe to the first
  proxied request reaching the server (both on the server's clock): the route going live, to
  within one poll (``route_poll_get_ms``: a GET of the waiting page, which reads the task's
  row); ``route_add_seen_ms`` runs to the poller holding the proxied body;
- ``listen_to_route_ms``: from the server starting to listen to that body (the probe cadence
  included: what a user waits for);
- ``route_remove_ms``: from sending ``POST /api/v1/notebooks/<id>/kill`` to the first refused
  proxied request (the kill's own work included: authorized, the allocation's state written,
  its agent told). The kill goes over an API connection opened beforehand, as a client that
  keeps its connection (the ``det`` CLI's session, a UI) sends it; ``kill_request_ms`` is its
  round trip alone, ``refused_after_answer_ms`` the rest (one poll, over the connection the
  route-add poll used: a browser's tab keeps its connection to the proxy).
"""

from __future__ import annotations

import http.client
import http.server
import multiprocessing
import socketserver
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from _common import REPO  # noqa: F401 (puts the repo on sys.path, for tests._master)

from tests._master import MasterProcess, free_port, wait_for


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    status_answered: float | None = None
    first_proxied: float | None = None


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        status = self.path.split("?")[0].endswith("/api/status")
        server: Any = self.server
        if not status and server.first_proxied is None:
            server.first_proxied = time.perf_counter()
        body = b'{"started": "2026-01-01T00:00:00Z"}' if status else b"x" * 100
        self.send_response(200)
        self.send_header("Content-Type", "application/json" if status else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        if status and server.status_answered is None:
            server.status_answered = time.perf_counter()

    def log_message(self, *args: Any) -> None:
        pass


def _poll(conn: http.client.HTTPConnection, path: str, headers: dict[str, str],
          until: Callable[[int, bytes], bool], timeout: float = 30) -> tuple[float, float]:
    """GET ``path`` over ``conn`` every half millisecond until ``until(status, body)``: when
    that answer came, and the median time a GET took (the poll's resolution). The connection
    is kept across calls (reopened where the proxy closes it), as a browser keeps its own."""
    deadline = time.perf_counter() + timeout
    took: list[float] = []
    while time.perf_counter() < deadline:
        sent = time.perf_counter()
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        now = time.perf_counter()
        took.append(now - sent)
        if resp.getheader("Connection", "").lower() == "close":
            conn.close()  # http.client reconnects on the next request
        if until(resp.status, body):
            return now, sorted(took)[len(took) // 2]
        time.sleep(0.0005)
    raise RuntimeError(f"GET {path} on port {conn.port}: no expected answer in {timeout:g} s")


def _one(master: MasterProcess, point_at: Callable[..., str | None],
         lab_listens: Callable[[str, str], bool]) -> dict[str, float] | None:
    client = master.admin()
    port = free_port()
    nb = client.post("/api/v1/notebooks", {"config": {"resources": {"slots": 0}}})["notebook"]["id"]
    own = point_at(master.data_dir / "det.db", nb, f"127.0.0.1:{port}")
    if own is None or not lab_listens(own, nb):
        client.post(f"/api/v1/notebooks/{nb}/kill")
        return None
    got = client.get(f"/api/v1/notebooks/{nb}")
    headers = {"Cookie": f"det_proxy={got['ticket']}"}
    proxy_port = urllib.parse.urlsplit(got["notebook"]["proxyUrl"]).port
    path = f"/proxy/{nb}/small"
    # Starting: the proxy answers with its waiting page while the probes are refused.
    wait_for(lambda: _status(proxy_port, path, headers) == 503, timeout=30, interval=0.05,
             what=f"notebook {nb} starting")
    time.sleep(1.5)  # a tick or more: the master holds the row with the swapped address
    # The server runs in a process of its own (a thread here would wait on the poller for the
    # GIL); it reports its times (CLOCK_MONOTONIC, shared by both processes) when stopped.
    ctx = multiprocessing.get_context("fork")
    times = ctx.Queue()
    stop = ctx.Event()
    child = ctx.Process(target=_serve, args=(port, times, stop), daemon=True)
    child.start()
    try:
        listening = times.get(timeout=30)
        api = _ApiConnection(master.url, client.token)
        # One proxy connection for both phases: the tab that saw the notebook come up is the
        # one that sees it go.
        proxied = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=10)
        try:
            routed, poll = _poll(proxied, path, headers, lambda s, b: s == 200 and b == b"x" * 100)
            killed = time.perf_counter()
            api.post(f"/api/v1/notebooks/{nb}/kill")
            answered_kill = time.perf_counter()
            refused, _ = _poll(proxied, path, headers, lambda s, b: s != 200)
        finally:
            proxied.close()
            api.close()
    finally:
        stop.set()
        answered, arrived = times.get(timeout=30)
        child.join(10)
    if answered is None or arrived is None:
        return None
    return {"route_add_ms": (arrived - answered) * 1e3, "route_add_seen_ms": (routed - answered) * 1e3, "listen_to_route_ms": (routed - listening) * 1e3,
            "route_remove_ms": (refused - killed) * 1e3, "kill_request_ms": (answered_kill - killed) * 1e3,
            "poll_get_ms": poll * 1e3,
            "refused_after_answer_ms": (refused - answered_kill) * 1e3}


class _ApiConnection:
    """One kept-alive connection to the master's API, connected before it is timed, so the
    timed request pays no TCP connect (nor urllib's per-request set-up). No request goes
    before it: the master checks the session token as for a fresh client."""

    def __init__(self, url: str, token: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self._conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        self._headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self._conn.connect()

    def _request(self, method: str, path: str, body: bytes | None = None) -> bytes:
        self._conn.request(method, path, body=body, headers=self._headers)
        resp = self._conn.getresponse()
        data = resp.read()
        if resp.status >= 400:
            raise RuntimeError(f"{method} {path}: {resp.status} {data[:200]!r}")
        return data

    def post(self, path: str) -> bytes:
        return self._request("POST", path, b"{}")

    def close(self) -> None:
        self._conn.close()


def _serve(port: int, times: Any, stop: Any) -> None:
    server = _Server(("127.0.0.1", port), _Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    times.put(time.perf_counter())
    stop.wait()
    server.shutdown()
    server.server_close()
    times.put((server.status_answered, server.first_proxied))


def _status(port: int | None, path: str, headers: dict[str, str]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def route_figures(master: MasterProcess, reps: int, point_at: Callable[..., str | None],
                  lab_listens: Callable[[str, str], bool]) -> dict[str, Any]:
    runs: list[dict[str, float]] = []
    for _ in range(reps + 3):
        if len(runs) == reps:
            break
        one = _one(master, point_at, lab_listens)
        if one is not None:
            runs.append(one)
    if not runs:
        raise RuntimeError("no notebook was routed to the route-timing server; see the master's log")

    def med(key: str) -> float:
        values = sorted(r[key] for r in runs)
        return values[len(values) // 2]

    return {"route_reps": len(runs), "route_add_ms": med("route_add_ms"),
            "listen_to_route_ms": med("listen_to_route_ms"), "route_remove_ms": med("route_remove_ms"),
            "route_poll_get_ms": med("poll_get_ms"), "route_add_seen_ms": med("route_add_seen_ms"),
            "route_kill_request_ms": med("kill_request_ms"),
            "route_refused_after_answer_ms": med("refused_after_answer_ms"),
            "route_runs": runs}
