"""Notebooks on a real master and agent: JupyterLab as a task, reached only through the master's
proxy, on the proxy's own origin (test_proxy_origin.py covers what the master's origin does). A kernel cell runs over the proxied websocket; another user, a missing or foreign
credential and a forged path all get 404 (reliability P1, P2, P3); a queued notebook gets a
waiting page that says why; idle notebooks are culled and busy ones are not (P5)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._master import ADMIN_PASSWORD, ApiError, Client, MasterProcess, wait_for
from tests.integration import _notebooks as nbh

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("nb") / "master", slots=2,
                      env={"DET_NOTEBOOK_IDLE_CHECK": "1"}).start()
    yield m
    m.stop()


@pytest.fixture(scope="module")
def notebook(cluster: MasterProcess) -> str:
    client = cluster.admin()
    nb_id = nbh.launch(client, resources={"slots": 0})
    nbh.wait_running(client, nb_id)
    return nb_id


def raw_get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict, bytes]:
    """A GET that does not follow redirects: (status, headers, body)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_a_kernel_cell_runs_over_the_proxied_websocket(cluster: MasterProcess, notebook: str) -> None:
    client = cluster.admin()
    proxy = nbh.proxy_client(client, notebook)
    status = proxy.get(f"/proxy/{notebook}/api/status")
    assert "started" in status
    kernel = nbh.start_kernel(client, notebook)
    out = asyncio.run(nbh.run_cell(nbh.ws_url(proxy.url, notebook, kernel),
                                   {"Authorization": f"Bearer {client.token}"}, "print(6 * 7)"))
    assert out.strip() == "42"
    # The lab UI itself is served under the proxy path.
    code, _, body = raw_get(f"{proxy.url}/proxy/{notebook}/lab",
                            {"Authorization": f"Bearer {client.token}"})
    assert code == 200 and b"jupyter" in body.lower()
    proxy.request("DELETE", f"/proxy/{notebook}/api/kernels/{kernel}")
    # It is a job like any other: listed in the queue as a notebook.
    jobs = client.get("/api/v1/job-queues-v2")["jobs"]
    assert any(j["full"]["type"] == "TYPE_NOTEBOOK" and j["full"]["entityId"] == notebook
               for j in jobs)


def test_big_bodies_and_conditional_answers_cross_the_proxy_whole(cluster: MasterProcess, notebook: str) -> None:
    """A 3 MB upload and its download (JSON and raw: streamed, not sent with the head), and a
    304 to a conditional GET, through the proxy's upstream client to the real JupyterLab."""
    client = cluster.admin()
    proxy = nbh.proxy_client(client, notebook)
    text = "".join(f"line {i:07d} of a big file\n" for i in range(120_000))  # about 3 MB
    proxy.request("PUT", f"/proxy/{notebook}/api/contents/big.txt",
                  {"type": "file", "format": "text", "content": text})
    got = proxy.get(f"/proxy/{notebook}/api/contents/big.txt?content=1&format=text&type=file")
    assert got["content"] == text
    auth = {"Authorization": f"Bearer {client.token}"}
    code, _, body = raw_get(f"{proxy.url}/proxy/{notebook}/files/big.txt", auth)
    assert (code, body.decode()) == (200, text)
    static = f"{proxy.url}/proxy/{notebook}/static/favicons/favicon.ico"
    code, headers, body = raw_get(static, auth)
    assert code == 200 and body and headers.get("Last-Modified"), ", ".join(sorted(headers))
    code, _, body = raw_get(static, {**auth, "If-Modified-Since": headers["Last-Modified"]})
    assert (code, body) == (304, b"")
    proxy.request("DELETE", f"/proxy/{notebook}/api/contents/big.txt")


def test_other_users_and_missing_credentials_get_404(cluster: MasterProcess, notebook: str) -> None:
    other = Client(cluster.url, cluster.login("determined", ADMIN_PASSWORD))
    proxy = nbh.proxy_origin(cluster.admin(), notebook)
    for path in (f"/api/v1/notebooks/{notebook}", f"/proxy/{notebook}/api/status"):
        with pytest.raises(ApiError) as err:
            other.get(path)
        assert err.value.status == 404
    with pytest.raises(ApiError) as err:
        Client(proxy, other.token).get(f"/proxy/{notebook}/api/status")
    assert err.value.status == 404
    assert notebook not in {n["id"] for n in other.get("/api/v1/notebooks")["notebooks"]}
    # Nobody, a bad token, another user: the same 404, over HTTP and websocket alike, on the
    # master's origin (no redirect for them) and on the proxy's.
    kernel = nbh.start_kernel(cluster.admin(), notebook)
    url = nbh.ws_url(proxy, notebook, kernel)
    for headers in ({}, {"Authorization": "Bearer not-a-token"},
                    {"Authorization": f"Bearer {other.token}"}):
        for origin in (cluster.url, proxy):
            assert raw_get(f"{origin}/proxy/{notebook}/api/kernels", headers)[0] == 404
        assert asyncio.run(nbh.ws_status(url, headers)) == 404


def test_tickets_are_good_for_their_own_notebook_only(cluster: MasterProcess, notebook: str) -> None:
    client = cluster.admin()
    second = nbh.launch(client, resources={"slots": 0})
    nbh.wait_running(client, second)
    ticket = client.get(f"/api/v1/notebooks/{notebook}")["ticket"]
    proxy = nbh.proxy_origin(client, notebook)
    # The link's ticket becomes a cookie of this notebook's path, and leaves the address bar.
    code, headers, _ = raw_get(f"{proxy}/proxy/{notebook}/lab?det_ticket={ticket}")
    assert code == 302 and headers["Location"] == f"/proxy/{notebook}/lab"
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and f"Path=/proxy/{notebook}/" in cookie and "SameSite=Lax" in cookie
    jar = {"Cookie": cookie.split(";", 1)[0]}
    assert raw_get(f"{proxy}/proxy/{notebook}/api/status", jar)[0] == 200
    # The same ticket on the other notebook: in the URL, as the cookie, on the websocket (P1).
    for origin in (cluster.url, proxy):
        assert raw_get(f"{origin}/proxy/{second}/api/status?det_ticket={ticket}")[0] == 404
        assert raw_get(f"{origin}/proxy/{second}/api/status", jar)[0] == 404
        assert raw_get(f"{origin}/proxy/{notebook}/api/status?det_ticket=1.9999999999.forged")[0] == 404
    kernel = nbh.start_kernel(client, second)
    assert asyncio.run(nbh.ws_status(nbh.ws_url(proxy, second, kernel), jar)) == 404
    client.post(f"/api/v1/notebooks/{second}/kill")


class CountingListener:
    """A TCP port no task owns, counting the connections it gets."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.count = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.count += 1
            conn.close()


def test_forged_paths_reach_nothing(cluster: MasterProcess, notebook: str) -> None:
    """SSRF and traversal (P2): nothing but the notebook's own address is ever connected to."""
    client = cluster.admin()
    listener = CountingListener()
    target = f"127.0.0.1:{listener.port}"
    auth = {"Authorization": f"Bearer {client.token}"}
    for path in (f"/proxy/{target}/", f"/proxy/{notebook}@{target}/", f"/proxy/http://{target}/",
                 f"/proxy/{notebook}/../{target}/", f"/proxy/{notebook}/%2e%2e/%2e%2e/api/v1/me",
                 f"/proxy/{notebook}/..%2f..%2fapi/v1/me", f"/proxy/user:pass@{target}/x",
                 f"/proxy/{notebook}/api/%252e%252e/%252e%252e/etc/passwd"):
        for origin in (cluster.url, nbh.proxy_origin(client, notebook)):
            code, _, body = raw_get(origin + path, auth)
            assert code == 404, (origin, path, code, body[:200])
    time.sleep(0.5)
    assert listener.count == 0
    listener.sock.close()


def test_error_pages_reflect_nothing(cluster: MasterProcess) -> None:
    """P3: no unescaped ``<`` from the request in any proxy response; HTML carries a CSP."""
    client = cluster.admin()
    evil = "%3Csvg%20onload%3Dalert(1)%3E"
    queued = nbh.launch(client, resources={"slots": 64}, description="<svg onload=alert(1)>")
    proxy = nbh.proxy_origin(client, queued)
    for origin in (cluster.url, proxy):
        code, headers, body = raw_get(f"{origin}/proxy/{evil}/{evil}?x={evil}",
                                      {"Authorization": f"Bearer {client.token}", "Accept": "text/html"})
        assert code == 404 and b"<" not in body
    code, headers, body = raw_get(f"{proxy}/proxy/{queued}/lab",
                                  {"Authorization": f"Bearer {client.token}", "Accept": "text/html"})
    assert code == 503 and headers["Retry-After"] == "2"
    assert b"<svg" not in body and b"&lt;svg onload=alert(1)&gt;" in body
    assert "sandbox" in headers["Content-Security-Policy"] or "default-src 'none'" in headers[
        "Content-Security-Policy"]
    # The waiting page says why it waits: the scheduler's reason, not a spinner.
    assert b"Queued: needs 64 slots" in body, body
    # It is a state, not a failure: not in the access log (where a 503 is an error with the
    # request's headers), while the refusals above are.
    wait_for(lambda: f"404 GET /proxy/{evil}" in cluster.log(), timeout=10, what="the refusals logged")
    assert f"/proxy/{queued}/lab" not in cluster.log()
    client.post(f"/api/v1/notebooks/{queued}/kill")


def test_idle_notebooks_are_culled_and_busy_ones_are_not(cluster: MasterProcess, tmp_path: Path) -> None:
    """P5 with a 5 s idle_timeout and a 1 s check: (a) idle, (b) websocket kernel traffic every
    2 s, (c) a busy kernel with no connection."""
    client = cluster.admin()
    auth = {"Authorization": f"Bearer {client.token}"}
    idle = nbh.launch(client, resources={"slots": 1}, idle_timeout="5s")
    chatty = nbh.launch(client, resources={"slots": 0}, idle_timeout="5s", notebook_idle_type="activity")
    busy = nbh.launch(client, resources={"slots": 0}, idle_timeout=5,
                      notebook_idle_type="kernel_connections")
    for nb in (idle, chatty, busy):
        nbh.wait_running(client, nb)
    ready_at = time.monotonic()
    busy_kernel = nbh.start_kernel(client, busy)
    chatty_kernel = nbh.start_kernel(client, chatty)
    proxy = nbh.proxy_origin(client, busy)
    # The busy kernel runs a long cell; its websocket is gone once the cell is sent.
    busy_url = nbh.ws_url(proxy, busy, busy_kernel)

    async def start_long_cell() -> None:
        from tornado import httpclient, websocket
        conn = await websocket.websocket_connect(httpclient.HTTPRequest(busy_url, headers=auth))
        await conn.write_message(__import__("json").dumps(nbh.execute_request("import time; time.sleep(60)")))
        await asyncio.sleep(0.5)
        conn.close()

    asyncio.run(start_long_cell())
    chatty_url = nbh.ws_url(proxy, chatty, chatty_kernel)
    stop = threading.Event()

    def chat() -> None:  # kernel traffic through the proxy every 2 s
        while not stop.is_set():
            asyncio.run(nbh.run_cell(chatty_url, auth, "1"))
            stop.wait(2)

    chatter = threading.Thread(target=chat, daemon=True)
    chatter.start()
    try:
        wait_for(lambda: state(client, idle) == "STATE_TERMINATED", timeout=20, interval=0.25,
                 what="the idle notebook culled")
        culled_after = time.monotonic() - ready_at
        assert culled_after <= 5 + 1 + 2, culled_after  # timeout + one check + 2 s slack
        time.sleep(max(0.0, 14 - culled_after))  # the others stay up well past their timeout
    finally:
        stop.set()
        chatter.join(10)
    ended = client.get(f"/api/v1/notebooks/{idle}")["notebook"]
    assert "culled: idle" in ended["exitStatus"], ended
    assert state(client, chatty) == "STATE_RUNNING"
    assert state(client, busy) == "STATE_RUNNING"
    # The culled notebook's slot is free again.
    agents = client.get("/api/v1/agents")["agents"]
    assert all(not s.get("container") for a in agents for s in a["slots"].values()), agents
    for nb in (chatty, busy):
        client.post(f"/api/v1/notebooks/{nb}/kill")


def test_a_notebook_reporting_activity_is_kept_and_culled_once_it_reports_idle(
        cluster: MasterProcess) -> None:
    """``PUT /api/v1/notebooks/{id}/report_idle`` (what Determined's check_idle.py sends):
    ``idle: false`` keeps a notebook past its idle_timeout; once it reports idle it is culled
    within the timeout and one check. Bad bodies get 400 and another user 404, changing
    nothing."""
    client = cluster.admin()
    nb = nbh.launch(client, resources={"slots": 0}, idle_timeout="4s")
    nbh.wait_running(client, nb)
    path = f"/api/v1/notebooks/{nb}/report_idle"

    def report(idle: object, who: Client = client, **extra: object) -> object:
        return who.request("PUT", path, {"notebookId": nb, "idle": idle, **extra})

    for body, words in (({"idle": "yes"}, "idle must be true or false"),
                        ({"notebookId": "someone-else", "idle": False}, "does not match")):
        with pytest.raises(ApiError) as err:
            client.request("PUT", path, body)
        assert err.value.status == 400 and words in err.value.body["message"], err.value.body
    other = Client(cluster.url, cluster.login("determined", ADMIN_PASSWORD))
    with pytest.raises(ApiError) as err:
        report(False, other)
    assert err.value.status == 404, err.value.body
    started = time.monotonic()
    while time.monotonic() - started < 8:  # twice its idle_timeout, reporting activity
        assert report(False) == {}
        time.sleep(1)
    assert state(client, nb) == "STATE_RUNNING"
    report(True)
    idle_at = time.monotonic()
    wait_for(lambda: state(client, nb) == "STATE_TERMINATED", timeout=20, interval=0.25,
             what="the notebook that reported idle culled")
    assert time.monotonic() - idle_at <= 4 + 1 + 2  # timeout + one check + 2 s slack
    ended = client.get(f"/api/v1/notebooks/{nb}")["notebook"]
    assert "culled: idle" in ended["exitStatus"], ended
    # A report for a notebook that has ended changes nothing and is not an error.
    assert report(False) == {}
    assert state(client, nb) == "STATE_TERMINATED"


def state(client: Client, nb_id: str) -> str:
    return nbh.state(client, nb_id)
