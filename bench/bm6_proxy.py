"""BM-6: notebook proxy overhead — det-jupyter's ``/proxy/{id}/`` vs jupyter-server-proxy 4.6
in jupyter_server 2.21 vs direct to the backend, in the same run, interleaved.

det-jupyter serves ``/proxy/`` on an origin of its own (the proxy's port, the notebook's
``proxyUrl``), apart from the master's (reliability P4): that is the port measured here.

Setup (untimed): a loopback backend (``_bm6_backend.py``: aiohttp 3.14.5 from bench/.venv-jsp;
tornado in --smoke) answering 100 B and 1 MiB GETs, a websocket echo and ``api/status`` under
any prefix. A real master (``det-jupyter up``, SQLite, embedded agent) launches a real
zero-slot notebook; as soon as the master has placed it, the notebook's recorded
``proxy_address`` is pointed at the backend (one UPDATE of its ``commands`` row, before the
master's first readiness probe of ``api/status``, which the backend answers), so every request
takes the proxy's real path: the ticket cookie checked, the route looked up, the upstream
called with the notebook's token. jupyter-server-proxy runs in jupyter_server in
bench/.venv-jsp (made here if missing) and is reached at ``/proxy/<port>/``.

Timed, per path, per repetition (order rotated each repetition: A/B/C, B/C/A, C/A/B):
1,000 sequential 100 B GETs on one keep-alive connection (rps, p50, p99), 2,000 100 B GETs
over 10 keep-alive connections (rps), 50 sequential 1 MiB GETs (MB/s), 2,000 sequential
200 B websocket echoes on one connection (RTT p50, msgs/s). The client is a minimal asyncio
HTTP/1.1 client (keep-alive, Content-Length and chunked bodies) and tornado's websocket
client, the same for every path, in this process; it shares the 2 cores with the servers.
Ratios are medians of per-repetition ratios; ``added_p50_ms`` is the median of per-repetition
(proxy p50 - direct p50). jupyter-server-proxy is skipped with DET_BENCH_PEERS=none.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from _bm6_cull import cull_figures
from _bm6_routes import route_figures
from _common import BENCH, emit, log, median, median_ratio, percentile

from tests._master import MasterProcess, free_port, wait_for

JSP_VENV = BENCH / ".venv-jsp"
JSP_PINS = ["jupyter-server-proxy==4.6.0", "jupyter_server==2.21.1", "aiohttp==3.14.5"]
WS_MESSAGE = "m" * 200


# -- the client ------------------------------------------------------------------------------

class Conn:
    """One keep-alive HTTP/1.1 connection: GET returns the body's length."""

    def __init__(self, port: int, headers: dict[str, str]) -> None:
        self.port = port
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.head = f"Host: 127.0.0.1:{port}\r\n{extra}\r\n"
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self, path: str) -> int:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        self.writer.write(f"GET {path} HTTP/1.1\r\n{self.head}".encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        fields = {}
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            fields[name.strip().lower()] = value.strip().lower()
        if b"content-length" in fields:
            size = len(await self.reader.readexactly(int(fields[b"content-length"])))
        elif fields.get(b"transfer-encoding") == b"chunked":
            size = 0
            while True:
                n = int((await self.reader.readline()).split(b";")[0], 16)
                await self.reader.readexactly(n + 2)
                size += n
                if n == 0:
                    break
        else:
            size = len(await self.reader.read())
            self.close()
        if fields.get(b"connection") == b"close":
            self.close()
        if status != 200:
            raise RuntimeError(f"GET {path} on port {self.port}: HTTP {status}")
        return size

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def sequential(port: int, path: str, headers: dict[str, str], n: int) -> list[float]:
    conn = Conn(port, headers)
    out = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            await conn.get(path)
            out.append(time.perf_counter() - t0)
    finally:
        conn.close()
    return out


async def concurrent(port: int, path: str, headers: dict[str, str], n: int, c: int) -> float:
    conns = [Conn(port, headers) for _ in range(c)]
    for conn in conns:
        await conn.get(path)  # connected before the clock starts

    async def worker(conn: Conn, k: int) -> None:
        for _ in range(k):
            await conn.get(path)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(conn, n // c) for conn in conns))
    wall = time.perf_counter() - t0
    for conn in conns:
        conn.close()
    return (n // c) * c / wall


async def bulk(port: int, path: str, headers: dict[str, str], n: int) -> float:
    conn = Conn(port, headers)
    await conn.get(path)
    t0 = time.perf_counter()
    total = 0
    for _ in range(n):
        total += await conn.get(path)
    wall = time.perf_counter() - t0
    conn.close()
    return total / wall / 1e6


async def echoes(port: int, path: str, headers: dict[str, str], n: int) -> list[float]:
    from tornado import httpclient, websocket

    req = httpclient.HTTPRequest(f"ws://127.0.0.1:{port}{path}", headers=headers)
    ws = await websocket.websocket_connect(req)
    out = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            await ws.write_message(WS_MESSAGE)
            reply = await ws.read_message()
            out.append(time.perf_counter() - t0)
            if reply != WS_MESSAGE:
                raise RuntimeError(f"websocket echo on port {port} returned {str(reply)[:40]!r}")
    finally:
        ws.close()
    return out


async def measure(spec: dict[str, Any], sizes: dict[str, int]) -> dict[str, float]:
    port, prefix, headers = spec["port"], spec["prefix"], spec["headers"]
    await sequential(port, f"{prefix}/small", headers, 20)  # warm-up
    lat = await sequential(port, f"{prefix}/small", headers, sizes["seq"])
    c10 = await concurrent(port, f"{prefix}/small", headers, sizes["c10"], 10)
    mbs = await bulk(port, f"{prefix}/big", headers, sizes["big"])
    rtt = await echoes(port, f"{prefix}/ws", headers, sizes["ws"])
    return {"seq_rps": len(lat) / sum(lat), "seq_p50_ms": percentile(lat, 50) * 1e3,
            "seq_p99_ms": percentile(lat, 99) * 1e3, "c10_rps": c10, "big_mb_s": mbs,
            "ws_rtt_p50_ms": percentile(rtt, 50) * 1e3, "ws_rtt_p99_ms": percentile(rtt, 99) * 1e3,
            "ws_msgs_s": len(rtt) / sum(rtt)}


# -- the servers -----------------------------------------------------------------------------

def wait_http(url: str, headers: dict[str, str] | None = None, timeout: float = 60) -> None:
    def ok() -> bool:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}),
                                        timeout=2) as resp:
                return resp.status == 200
        except OSError:
            return False

    wait_for(ok, timeout=timeout, interval=0.2, what=url)


def ensure_jsp_venv() -> Path:
    py = JSP_VENV / "bin" / "python"
    if not py.exists():
        log(f"creating {JSP_VENV} with {JSP_PINS}")
        subprocess.run([sys.executable, "-m", "venv", str(JSP_VENV)], check=True)
        subprocess.run([str(JSP_VENV / "bin" / "pip"), "install", "-q", *JSP_PINS], check=True)
    return py


def start_jsp(py: Path, tmp: Path) -> tuple[subprocess.Popen, int, str]:
    port, token = free_port(), "bm6-" + os.urandom(8).hex()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp / "jcfg"),
           "JUPYTER_DATA_DIR": str(tmp / "jdata"), "JUPYTER_RUNTIME_DIR": str(tmp / "jrt")}
    proc = subprocess.Popen(
        [str(py), "-m", "jupyter_server", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
         "--ServerApp.open_browser=False", f"--ServerApp.root_dir={tmp}",
         *(["--ServerApp.allow_root=True"] if os.geteuid() == 0 else [])],
        stdout=open(tmp / "jsp.log", "ab"), stderr=subprocess.STDOUT, env=env,
        stdin=subprocess.DEVNULL)
    wait_http(f"http://127.0.0.1:{port}/api/status", {"Authorization": f"token {token}"})
    return proc, port, token


def _point_at(db: Path, task_id: str, address: str, timeout: float = 120) -> str | None:
    """Once the master placed the task (recorded its address), record ``address`` instead,
    before its first readiness probe; the address it had (None if the task ended first)."""
    con = sqlite3.connect(db, timeout=30)
    try:
        deadline = time.time() + timeout
        while time.time() < deadline:
            row = con.execute("SELECT proxy_address, end_time FROM commands WHERE task_id = ?",
                              (task_id,)).fetchone()
            if row and row[1] is not None:
                return None
            if row and row[0]:
                with con:
                    con.execute("UPDATE commands SET proxy_address = ? WHERE task_id = ?",
                                (address, task_id))
                return str(row[0])
            time.sleep(0.02)
    finally:
        con.close()
    raise RuntimeError(f"notebook {task_id} was not placed in {timeout:g} s")


def proxied_notebook(master: MasterProcess, backend_port: int) -> tuple[str, str, int]:
    """A running notebook whose recorded address is the backend: (its id, a ticket, the port
    of the proxy's origin).

    The master probes a placed notebook's ``api/status`` and, once it answers, routes to the
    address it read then (kept in memory); the address is swapped between placement and the
    first probe (JupyterLab takes seconds to answer), and the result is checked: the proxy
    must return the backend's 100 B body."""
    client = master.admin()
    for attempt in range(5):
        nb = client.post("/api/v1/notebooks", {"config": {"resources": {"slots": 0}}})["notebook"]["id"]
        own = _point_at(master.data_dir / "det.db", nb, f"127.0.0.1:{backend_port}")
        if own is not None and _lab_listens(own, nb):
            state = wait_for(lambda nb=nb: (s := client.get(f"/api/v1/notebooks/{nb}")["notebook"]["state"])
                             in ("STATE_RUNNING", "STATE_TERMINATED") and s,
                             timeout=120, interval=0.2, what=f"notebook {nb} running")
            got = client.get(f"/api/v1/notebooks/{nb}")
            ticket, proxy_port = got["ticket"], urllib.parse.urlsplit(got["notebook"]["proxyUrl"]).port
            if state == "STATE_RUNNING" and proxy_port:
                body = asyncio.run(sequential_body(proxy_port, f"/proxy/{nb}/small",
                                                   {"Cookie": f"det_proxy={ticket}"}))
                if body == 100:
                    return nb, ticket, proxy_port
        log(f"notebook {nb} is not routed to the backend (attempt {attempt + 1}); another")
        client.post(f"/api/v1/notebooks/{nb}/kill")
        time.sleep(1)
    raise RuntimeError("no notebook was routed to the backend in 5 attempts; see the master's log")


def _lab_listens(address: str, task_id: str, timeout: float = 90) -> bool:
    """Whether the notebook's own JupyterLab came up on its port (so the task keeps running
    through the benchmark): it answers under its ``/proxy/<id>/`` base URL with anything but a
    404. False when the port stays refused or is another server's (another master's task on
    a shared machine: JupyterLab then exits and the task ends)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://{address}/proxy/{task_id}/api/status", timeout=2).close()
            return True
        except urllib.error.HTTPError as exc:
            return exc.code != 404
        except OSError:
            time.sleep(0.2)
    return False


async def sequential_body(port: int, path: str, headers: dict[str, str]) -> int:
    conn = Conn(port, headers)
    try:
        return await conn.get(path)
    except RuntimeError:
        return -1
    finally:
        conn.close()


# -- the run ---------------------------------------------------------------------------------

def summarize(runs: list[dict[str, dict[str, float]]], paths: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in paths:
        for key in runs[0][p]:
            out[f"{p}_{key}"] = median([r[p][key] for r in runs])

    def col(p: str, key: str) -> list[float]:
        return [r[p][key] for r in runs]

    out["added_p50_ms"] = median([a - b for a, b in zip(col("ours", "seq_p50_ms"),
                                                         col("direct", "seq_p50_ms"), strict=True)])
    out["ratio_c10_vs_direct"] = median_ratio(col("ours", "c10_rps"), col("direct", "c10_rps"))
    out["ratio_seq_vs_direct"] = median_ratio(col("ours", "seq_rps"), col("direct", "seq_rps"))
    out["ratio_big_vs_direct"] = median_ratio(col("ours", "big_mb_s"), col("direct", "big_mb_s"))
    if "jsp" in paths:
        out["jsp_added_p50_ms"] = median([a - b for a, b in zip(col("jsp", "seq_p50_ms"),
                                                                 col("direct", "seq_p50_ms"), strict=True)])
        out["ratio_seq_vs_jsp"] = median_ratio(col("ours", "seq_rps"), col("jsp", "seq_rps"))
        out["ratio_c10_vs_jsp"] = median_ratio(col("ours", "c10_rps"), col("jsp", "c10_rps"))
        out["ratio_big_vs_jsp"] = median_ratio(col("ours", "big_mb_s"), col("jsp", "big_mb_s"))
        # > 1: our websocket round trip is shorter than jupyter-server-proxy's.
        out["ratio_ws_rtt_jsp_over_ours"] = median_ratio(col("ours", "ws_rtt_p50_ms"),
                                                         col("jsp", "ws_rtt_p50_ms"),
                                                         higher_is_better=False)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition, no peer")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    sizes = ({"seq": 50, "c10": 100, "big": 3, "ws": 50} if a.smoke else
             {"seq": 1000, "c10": 2000, "big": 50, "ws": 2000})
    reps = 1 if a.smoke else a.reps
    use_jsp = not a.smoke and os.environ.get("DET_BENCH_PEERS", "").strip() != "none"
    py = ensure_jsp_venv() if use_jsp else Path(sys.executable)
    procs: list[subprocess.Popen] = []
    master = None
    with tempfile.TemporaryDirectory(prefix="bm6-") as tmp_s:
        tmp = Path(tmp_s)
        try:
            backend_port = free_port()
            procs.append(subprocess.Popen([str(py), str(BENCH / "_bm6_backend.py"), str(backend_port)],
                                          stdin=subprocess.DEVNULL))
            wait_http(f"http://127.0.0.1:{backend_port}/api/status")
            cull = cull_figures(backend_port, 50 if a.smoke else 500)
            log("idle culler: " + ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                            for k, v in cull.items()))
            master = MasterProcess(tmp / "master", slots=1).start()
            nb, ticket, proxy_port = proxied_notebook(master, backend_port)
            paths: dict[str, dict[str, Any]] = {
                "direct": {"port": backend_port, "prefix": "", "headers": {}},
                "ours": {"port": proxy_port, "prefix": f"/proxy/{nb}",
                         "headers": {"Cookie": f"det_proxy={ticket}"}},
            }
            if use_jsp:
                jsp, jsp_port, token = start_jsp(py, tmp)
                procs.append(jsp)
                paths["jsp"] = {"port": jsp_port, "prefix": f"/proxy/{backend_port}",
                                "headers": {"Authorization": f"token {token}"}}
            order = list(paths)
            runs = []
            t0 = time.time()
            for rep in range(reps):
                rotated = order[rep % len(order):] + order[:rep % len(order)]
                run = {}
                for p in rotated:
                    run[p] = asyncio.run(measure(paths[p], sizes))
                    log(f"rep {rep + 1} {p}: " + ", ".join(f"{k} {v:.3g}" for k, v in run[p].items()))
                runs.append(run)
            wall = time.time() - t0
            routes = route_figures(master, 1 if a.smoke else 9, _point_at, _lab_listens)
            log("routes: " + ", ".join(f"{k} {v:.3g}" for k, v in routes.items() if isinstance(v, float)))
        finally:
            if master is not None:
                master.stop()
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=20)
    summary = {"bench": "bm6_proxy", "smoke": a.smoke, "reps": reps, "sizes": sizes,
               "peers": ["jupyter-server-proxy==4.6.0"] if use_jsp else [],
               "backend": "aiohttp" if use_jsp or importlib.util.find_spec("aiohttp") else "tornado",
               "wall_s": wall,
               **cull, **routes, **summarize(runs, list(paths)), "runs": runs}
    emit(summary)


if __name__ == "__main__":
    main()
