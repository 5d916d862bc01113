"""Bodies to Jupyter's own routes on a real master (issue 25, part 1): the server's limit is a
modest 64 MiB instead of jupyter-server's 512 MiB, its unauthenticated ``POST /login`` takes
64 KiB, and det's own routes still take their larger bodies."""

from __future__ import annotations

import http.client
import json
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._master import MasterProcess

pytestmark = pytest.mark.slow

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MasterProcess, str]]:
    token = secrets.token_hex(16)
    m = MasterProcess(tmp_path_factory.mktemp("bodies") / "master", env={"JUPYTER_TOKEN": token},
                      extra_args=["--no-agent"]).start()
    yield m, token
    m.stop()


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _stream_zeros(port: int, method: str, path: str, total: int, *, chunked: bool,
                  headers: dict[str, str] | None = None) -> str:
    """Send ``total`` zero bytes as a body (declared or chunked) until the master answers or
    cuts the connection; how it ended."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    head = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}",
            "Content-Type: application/x-www-form-urlencoded",
            "Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}",
            *(f"{k}: {v}" for k, v in (headers or {}).items())]
    s.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
    block = b"\0" * MiB
    sent = 0
    try:
        while sent < total:
            s.sendall(block if not chunked else b"%x\r\n" % len(block) + block + b"\r\n")
            sent += len(block)
        if chunked:
            s.sendall(b"0\r\n\r\n")
        answer = s.recv(4096)
        return answer.split(b"\r\n", 1)[0].decode(errors="replace") or f"closed after {sent // MiB} MiB"
    except OSError as exc:
        return f"cut after {sent // MiB} MiB ({type(exc).__name__})"
    finally:
        s.close()


def test_four_500_mib_bodies_to_jupyters_login_leave_memory_flat(cluster: tuple[MasterProcess, str]) -> None:
    master, _ = cluster
    assert master.proc is not None
    pid = master.proc.pid
    before = _rss_kib(pid)
    peak = [before]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _rss_kib(pid))
            time.sleep(0.02)

    ends: list[str] = []
    sampler = threading.Thread(target=sample)
    sampler.start()
    senders = [threading.Thread(target=lambda c=c: ends.append(
        _stream_zeros(master.port, "POST", "/login", 500 * MiB, chunked=c))) for c in (False, True, False, True)]
    for t in senders:
        t.start()
    for t in senders:
        t.join(120)
    stop.set()
    sampler.join()
    growth_mb = (peak[0] - before) / 1024
    print(f"RSS before {before / 1024:.0f} MB, peak {peak[0] / 1024:.0f} MB, growth {growth_mb:.1f} MB; ends: {ends}")
    assert growth_mb <= 50, f"the master grew {growth_mb:.0f} MB"
    assert len(ends) == 4 and not any(" 200 " in e or " 302 " in e for e in ends), ends
    assert master.admin().get("/api/v1/master")["clusterName"] is not None  # still serving


def _request(port: int, method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except OSError as exc:  # the server closed the connection while the body was sent
        return 0, str(exc).encode()
    finally:
        conn.close()


def test_jupyter_takes_lab_uploads_up_to_64_mib_and_det_routes_keep_their_limits(
        cluster: tuple[MasterProcess, str]) -> None:
    master, token = cluster
    jupyter = {"Authorization": f"token {token}", "Content-Type": "application/json"}
    # JupyterLab uploads a file of up to 15 MiB in one PUT, base64 (20 MiB of JSON).
    content = "A" * (20 * MiB)
    upload = json.dumps({"type": "file", "format": "base64", "content": content}).encode()
    status, body = _request(master.port, "PUT", "/api/contents/det-bodies-upload.bin", upload, jupyter)
    assert status in (200, 201), body[:300]
    assert _request(master.port, "DELETE", "/api/contents/det-bodies-upload.bin", b"", jupyter)[0] == 204
    # Over the server's 64 MiB: refused before it is buffered (400, or the connection cut).
    ending = _stream_zeros(master.port, "PUT", "/api/contents/det-bodies-big.bin", 80 * MiB, chunked=True,
                           headers={"Authorization": f"token {token}"})
    assert " 20" not in ending, ending
    # det's experiment route takes bodies past the server's 64 MiB (its own limit is 128 MiB):
    # an 80 MiB body is read and answered by the route (its config is too long), not cut by
    # the server.
    bearer = {"Authorization": f"Bearer {master.login()}", "Content-Type": "application/json"}
    big = json.dumps({"config": "x" * (80 * MiB)}).encode()
    status, body = _request(master.port, "POST", "/api/v1/experiments", big, bearer)
    assert status in (400, 413) and b"the experiment config is 80 MiB" in body, (status, body[:300])
