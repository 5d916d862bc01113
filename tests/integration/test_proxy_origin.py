"""The proxy on an origin of its own (reliability P4), against a real master and a real notebook.

(a) The notebook is served on the proxy's origin (another port), not on the master's: the
    master's ``/proxy/…`` only redirects there (307, path and query kept, the ticket included,
    no cookie set), refuses websocket upgrades (404), and a kernel cell runs over the proxy
    origin's websocket.
(b) P4: a request to the master's ``/det-jupyter/session`` or Jupyter ``/api/kernels`` from the
    proxy's origin (``Origin`` set, the master's cookies, with or without the ``_xsrf`` a page
    there can read from ``document.cookie``) is refused, with no CORS header; in headless
    Chromium, script in a proxied page cannot call the master, while the same script on the
    master's own origin can (so the check is able to fail).
(c) W3: the master's redirect never leaves the request's host: a corpus of ``Host`` headers and
    paths gives either a ``Location`` of ``http://<that hostname>:<proxy port>/proxy/<id>/…`` or
    400.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import os
import secrets
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from urllib.parse import quote, urlsplit

import pytest

from tests._master import MasterProcess, free_port, wait_for
from tests.integration import _notebooks as nbh

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("DET_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MasterProcess, str]]:
    """A master with a known Jupyter token (its browser users log in with it)."""
    token = secrets.token_hex(16)
    m = MasterProcess(tmp_path_factory.mktemp("origin") / "master", slots=1,
                      env={"JUPYTER_TOKEN": token}).start()
    yield m, token
    m.stop()


@pytest.fixture(scope="module")
def notebook(cluster: tuple[MasterProcess, str]) -> str:
    client = cluster[0].admin()
    nb_id = nbh.launch(client, resources={"slots": 0})
    nbh.wait_running(client, nb_id)
    return nb_id


@pytest.fixture(scope="module")
def proxy(cluster: tuple[MasterProcess, str], notebook: str) -> str:
    origin = nbh.proxy_origin(cluster[0].admin(), notebook)
    assert urlsplit(origin).hostname == "127.0.0.1"
    assert urlsplit(origin).port != cluster[0].port  # another origin: another port
    return origin


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def fetch(url: str, headers: dict[str, str] | None = None, method: str = "GET",
          data: bytes | None = None, opener: urllib.request.OpenerDirector | None = None,
          ) -> tuple[int, dict[str, str], bytes]:
    """One request, redirects not followed: (status, headers, body)."""
    req = urllib.request.Request(url, headers=headers or {}, method=method, data=data)
    try:
        with (opener or urllib.request.build_opener(_NoRedirect)).open(req, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def kernel_count(base: str, path: str, headers: dict[str, str]) -> int:
    code, _, body = fetch(base + path, headers)
    assert code == 200, (code, body[:200])
    return len(json.loads(body))


# -- (a) served on the proxy's origin only -----------------------------------------------------

def test_the_master_origin_redirects_to_the_proxy_origin(cluster: tuple[MasterProcess, str],
                                                         notebook: str, proxy: str) -> None:
    master, _ = cluster
    client = master.admin()
    bearer = {"Authorization": f"Bearer {client.token}"}
    ticket = client.get(f"/api/v1/notebooks/{notebook}")["ticket"]
    # The notebook's JSON: the stock client's relative path, and the absolute proxy address.
    nb = client.get(f"/api/v1/notebooks/{notebook}")["notebook"]
    assert nb["serviceAddress"] == f"/proxy/{notebook}/"
    assert nb["proxyUrl"] == f"{proxy}/proxy/{notebook}/"
    listed = {n["id"]: n for n in client.get("/api/v1/notebooks")["notebooks"]}
    assert listed[notebook]["proxyUrl"] == nb["proxyUrl"]
    # The ticket link: 307 to the same path and query on the proxy's origin, no cookie here.
    path = f"/proxy/{notebook}/lab/tree?det_ticket={ticket}&reset"
    code, headers, body = fetch(master.url + path)
    assert code == 307 and headers["Location"] == proxy + path, headers
    assert "Set-Cookie" not in headers and b"jupyter" not in body.lower()
    # A bearer request too, whatever the verb; nothing reaches the notebook from here.
    kernels = f"/proxy/{notebook}/api/kernels"
    before = kernel_count(proxy, kernels, bearer)
    for method in ("GET", "POST", "PUT", "DELETE", "PATCH"):
        code, headers, body = fetch(master.url + kernels, bearer, method,
                                    b'{"name": "python3"}' if method in ("POST", "PUT", "PATCH") else None)
        assert code == 307 and headers["Location"] == proxy + kernels, (method, code, body[:200])
    assert kernel_count(proxy, kernels, bearer) == before
    # The hostname the client used is kept, only the port changes.
    code, headers, _ = fetch(master.url + path, {"Host": f"localhost:{master.port}"})
    assert code == 307 and headers["Location"] == f"http://localhost:{urlsplit(proxy).port}{path}"
    # Followed like a browser would: the proxy's origin trades the ticket for its own cookie.
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with browser.open(master.url + f"/proxy/{notebook}/lab?det_ticket={ticket}", timeout=60) as resp:
        assert resp.status == 200 and resp.url == f"{proxy}/proxy/{notebook}/lab"
    cookie = next(c for c in jar if c.name == "det_proxy")
    assert cookie.path == f"/proxy/{notebook}/"
    assert cookie.has_nonstandard_attr("HttpOnly") or cookie.has_nonstandard_attr("httponly")
    # The proxy's origin serves /proxy/ only: not the master's API.
    assert fetch(f"{proxy}/api/v1/me", bearer)[0] == 404
    assert fetch(f"{proxy}/api/status", bearer)[0] == 404


def test_websockets_upgrade_on_the_proxy_origin_only(cluster: tuple[MasterProcess, str],
                                                     notebook: str, proxy: str) -> None:
    master, _ = cluster
    client = master.admin()
    bearer = {"Authorization": f"Bearer {client.token}"}
    kernel = nbh.start_kernel(client, notebook)
    try:
        assert asyncio.run(nbh.ws_status(nbh.ws_url(master.url, notebook, kernel), bearer)) == 404
        out = asyncio.run(nbh.run_cell(nbh.ws_url(proxy, notebook, kernel), bearer, "print(6 * 7)"))
        assert out.strip() == "42"
    finally:
        nbh.proxy_client(client, notebook).request("DELETE", f"/proxy/{notebook}/api/kernels/{kernel}")


# -- (b) P4: the proxy's origin cannot use the master's cookies --------------------------------

def _jupyter_login(master: MasterProcess, token: str) -> tuple[urllib.request.OpenerDirector, str]:
    """A browser-like cookie session on the master (login cookie and ``_xsrf``)."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), _NoRedirect)
    with opener.open(f"{master.url}/lab?token={token}", timeout=60):
        pass
    xsrf = next(c.value for c in jar if c.name == "_xsrf")
    assert any(c.name.startswith("username-") for c in jar), [c.name for c in jar]
    return opener, xsrf


def test_requests_from_the_proxy_origin_are_refused(cluster: tuple[MasterProcess, str],
                                                    proxy: str) -> None:
    master, token = cluster
    opener, xsrf = _jupyter_login(master, token)
    session = f"{master.url}/det-jupyter/session"
    # The control: the cookie session works from the master's own origin.
    code, _, body = fetch(session, {"X-XSRFToken": xsrf}, "POST", b"", opener)
    assert code == 200 and json.loads(body)["token"], body[:200]
    assert fetch(session, {}, "POST", b"", opener)[0] == 403  # no _xsrf: Jupyter's XSRF check
    before = kernel_count(master.url, "/api/kernels", {"Authorization": f"token {token}"})
    attempts = [  # (method, url, headers): Origin is the proxy's, cookies the master's
        ("POST", session, {}),
        ("POST", session, {"X-XSRFToken": xsrf}),  # the _xsrf a proxied page reads from document.cookie
        ("POST", f"{session}?_xsrf={quote(xsrf, safe='')}", {"Content-Type": "text/plain"}),
        ("GET", f"{master.url}/api/kernels", {}),
        ("POST", f"{master.url}/api/kernels", {"Content-Type": "text/plain"}),
        ("POST", f"{master.url}/api/kernels?_xsrf={quote(xsrf, safe='')}", {"Content-Type": "text/plain"}),
        ("POST", f"{master.url}/api/kernels", {"X-XSRFToken": xsrf}),
        ("GET", f"{master.url}/api/contents", {}),
    ]
    for method, url, headers in attempts:
        code, got, body = fetch(url, {"Origin": proxy, **headers}, method,
                                b'{"name": "python3"}' if method == "POST" else None, opener)
        # Jupyter answers a foreign Origin with 404 (check_origin), a missing _xsrf with 403.
        assert code in (403, 404), (method, url, headers, code, body[:200])
        assert "Access-Control-Allow-Origin" not in got, (url, got)
        assert b'"token"' not in body, body[:200]
    assert kernel_count(master.url, "/api/kernels", {"Authorization": f"token {token}"}) == before
    # A CORS preflight gets no allowance either, and det routes take no cookies at all.
    for url in (session, f"{master.url}/api/kernels", f"{master.url}/api/v1/me"):
        code, got, _ = fetch(url, {"Origin": proxy, "Access-Control-Request-Method": "POST",
                                   "Access-Control-Request-Headers": "x-xsrftoken"}, "OPTIONS",
                             opener=opener)
        assert "Access-Control-Allow-Origin" not in got, (url, code, got)
    assert fetch(f"{master.url}/api/v1/me", {"Origin": proxy}, opener=opener)[0] == 401


PAGE_SCRIPT = """async ([master, startKernel]) => {
  const out = {};
  // The last _xsrf is the one of path "/": the master's (longer paths are listed first).
  const all = [...document.cookie.matchAll(/(?:^|; )_xsrf=([^;]*)/g)];
  const xsrf = all.length ? decodeURIComponent(all[all.length - 1][1]) : '';
  out.readXsrf = xsrf !== '';
  async function attempt(name, url, init) {
    try {
      const r = await fetch(url, {credentials: 'include', ...init});
      out[name] = {status: r.status, type: r.type, body: r.type === 'opaque' ? '' : await r.text()};
    } catch (e) {
      out[name] = {error: String(e)};
    }
  }
  await attempt('session', master + '/det-jupyter/session',
                {method: 'POST', headers: {'X-XSRFToken': xsrf}});
  await attempt('kernels', master + '/api/kernels', {});
  if (startKernel) {
    await attempt('start', master + '/api/kernels?_xsrf=' + encodeURIComponent(xsrf),
                  {method: 'POST', mode: 'no-cors', body: '{"name": "python3"}',
                   headers: {'Content-Type': 'text/plain'}});
  }
  return out;
}"""


def test_p4_script_in_a_proxied_page_cannot_call_the_master(cluster: tuple[MasterProcess, str],
                                                           notebook: str, proxy: str) -> None:
    """Headless Chromium logged in to the master (its cookies in the browser) runs script in
    the proxied notebook's page: every call to the master fails; the same script on the
    master's origin succeeds."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set DET_TEST_CHROMIUM)")
    master, token = cluster
    client = master.admin()
    ticket = client.get(f"/api/v1/notebooks/{notebook}")["ticket"]
    jupyter = {"Authorization": f"token {token}"}
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page()
            page.set_default_timeout(60_000)
            page.goto(f"{master.url}/lab?token={token}", wait_until="commit")  # the master's cookies
            before = kernel_count(master.url, "/api/kernels", jupyter)
            log_mark = len(master.log())
            # The ticket link, opened on the master's origin, lands on the proxy's: JupyterLab's
            # page, where a notebook's HTML output runs (an API answer's CSP would forbid fetch).
            page.goto(f"{master.url}/proxy/{notebook}/lab?det_ticket={ticket}", wait_until="domcontentloaded")
            assert page.url == f"{proxy}/proxy/{notebook}/lab", page.url
            attack = page.evaluate(PAGE_SCRIPT, [master.url, True])
            # Cookies ignore ports: the page can read the master's _xsrf, and still gets nowhere.
            assert attack["readXsrf"], attack
            assert "error" in attack["session"], attack  # CORS: the answer never reaches script
            assert "error" in attack["kernels"], attack
            # The no-cors POST is sent (opaque, or a network error once Chromium's ORB blocks
            # the JSON answer) and refused by the master: it logs the foreign Origin it blocked.
            assert attack["start"].get("type") == "opaque" or "error" in attack["start"], attack
            wait_for(lambda: f"Origin: {proxy}" in master.log()[log_mark:], timeout=10,
                     what="the master's log of the blocked cross-origin request")
            time.sleep(0.5)
            assert kernel_count(master.url, "/api/kernels", jupyter) == before
            # The control: the same script on the master's own origin does get a det session.
            page.goto(f"{master.url}/lab", wait_until="domcontentloaded")
            control = page.evaluate(PAGE_SCRIPT, [master.url, False])
            assert control["session"]["status"] == 200 and "token" in control["session"]["body"], control
            assert control["kernels"]["status"] == 200, control
        finally:
            browser.close()


# -- (c) W3: the redirect never leaves the request's host --------------------------------------

def raw_http(port: int, request: bytes) -> tuple[int, list[tuple[str, str]]]:
    """Send ``request`` as it is; the status (0: closed without an answer) and header lines."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    if not head.startswith("HTTP/"):
        return 0, []
    lines = head.split("\r\n")
    headers = [(k.strip().lower(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:])]
    return int(lines[0].split()[1]), headers


def _hosts(port: int) -> tuple[list[tuple[str, str]], list[str]]:
    """(Host header, the hostname the Location must name) pairs, and malformed Hosts."""
    good = [(f"127.0.0.1:{port}", "127.0.0.1"), ("127.0.0.1", "127.0.0.1"),
            (f"localhost:{port}", "localhost"), ("LOCALHOST", "localhost"), ("evil.com", "evil.com"),
            ("evil.com:80", "evil.com"), (f"[::1]:{port}", "[::1]"), ("gpu-01.lan", "gpu-01.lan")]
    bad = ["127.0.0.1@evil.com", "127.0.0.1:1/..//evil", "//evil", "evil.com/", "http://evil.com",
           "evil.com:80@x", f"127.0.0.1:{port}\\@evil.com", "evil.com:abc", "evil.com:99999",
           "127.0.0.1#@evil.com", "127.0.0.1?@evil.com", "%2F%2Fevil", "javascript:alert(1)",
           "127.0.0.1:1:2", "[::1", "\\\\evil", "/\\evil", "evil.com.", " ", "127.0.0.1,evil.com",
           "127.0.0.1;evil.com", "a b", "https:evil", "evil.com:80/", "user:pass@evil.com"]
    return good, bad


def test_the_redirect_never_leaves_the_requests_host(cluster: tuple[MasterProcess, str],
                                                     notebook: str, proxy: str) -> None:
    master, _ = cluster
    ticket = master.admin().get(f"/api/v1/notebooks/{notebook}")["ticket"]
    proxy_port = urlsplit(proxy).port
    good, bad = _hosts(master.port)
    paths = [f"/proxy/{notebook}/lab", f"/proxy/{notebook}//evil.com/", f"/proxy/{notebook}/\\evil",
             f"/proxy/{notebook}/%2F%2Fevil", f"/proxy/{notebook}/https:evil",
             f"/proxy/{notebook}/javascript:alert(1)", f"/proxy/{notebook}/%0d%0aSet-Cookie:%20x=1",
             f"/proxy/{notebook}/?next=//evil&redirect=https://evil"]
    checked = 0
    for host, hostname in good:
        for path in paths:
            sep = "&" if "?" in path else "?"
            target = f"{path}{sep}det_ticket={ticket}"
            status, headers = raw_http(master.port, f"GET {target} HTTP/1.1\r\nHost: {host}\r\n"
                                                    f"Connection: close\r\n\r\n".encode("latin-1"))
            locations = [v for k, v in headers if k == "location"]
            assert status == 307 and len(locations) == 1, (host, path, status, headers)
            assert locations[0] == f"http://{hostname}:{proxy_port}{target}", (host, path, locations)
            assert not any(k == "set-cookie" for k, _ in headers), (host, path, headers)
            checked += 1
    for host in bad:
        status, headers = raw_http(master.port, f"GET /proxy/{notebook}/lab?det_ticket={ticket} HTTP/1.1\r\n"
                                                f"Host: {host}\r\nConnection: close\r\n\r\n".encode("latin-1"))
        assert status in (0, 400), (host, status, headers)
        assert not any(k == "location" for k, _ in headers), (host, headers)
        checked += 1
    # Two Host headers, and none at all (HTTP/1.1 requires one).
    for extra in (f"Host: 127.0.0.1:{master.port}\r\nHost: evil.com\r\n", ""):
        status, headers = raw_http(master.port, f"GET /proxy/{notebook}/lab?det_ticket={ticket} HTTP/1.1\r\n"
                                                f"{extra}Connection: close\r\n\r\n".encode())
        locations = [v for k, v in headers if k == "location"]
        assert status in (0, 400) or (status == 307 and urlsplit(locations[0]).hostname == "127.0.0.1"), (
            extra, status, headers)
        checked += 1
    # On the proxy's origin, the ticket's own redirect is a path on that origin, never //host.
    for path in paths:
        sep = "&" if "?" in path else "?"
        status, headers = raw_http(proxy_port, f"GET {path}{sep}det_ticket={ticket} HTTP/1.1\r\n"
                                               f"Host: 127.0.0.1:{proxy_port}\r\nConnection: close\r\n\r\n".encode())
        locations = [v for k, v in headers if k == "location"]
        assert status == 302 and len(locations) == 1, (path, status, headers)
        assert locations[0].startswith(f"/proxy/{notebook}/") and "det_ticket" not in locations[0], locations
        checked += 1
    assert checked >= 30



# -- (d) Jupyter's own routes: a strict origin, redirects that stay on the host ---------------

def _exchange(port: int, method: str, target: str, headers: dict[str, str] | None = None,
              body: bytes = b"") -> tuple[int, list[tuple[str, str]], bytes]:
    """``method target`` with exactly these headers (and ``Host``, unless given) and body, on a
    connection of its own: (status, header lines, body)."""
    lines = [f"{method} {target} HTTP/1.1"]
    if not any(k.lower() == "host" for k in headers or {}):
        lines.append(f"Host: 127.0.0.1:{port}")
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    lines += [f"Content-Length: {len(body)}", "Connection: close"]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    parsed = [(k.strip().lower(), v.strip()) for k, _, v in (line.partition(":") for line in header_lines)]
    return int(status_line.split()[1]), parsed, rest


def _header(headers: list[tuple[str, str]], name: str) -> list[str]:
    return [v for k, v in headers if k == name]


def _stays_on_host(location: str, own: str) -> bool:
    """Whether a browser following ``location`` stays on origin ``own``: it drops tabs and
    newlines, reads a backslash as a slash, and takes ``//host`` to another host."""
    text = location.strip("\x00 ").replace("\t", "").replace("\n", "").replace("\r", "").replace("\\", "/")
    if text.startswith("//"):
        return False
    if ":" in text.split("/", 1)[0]:  # a scheme: absolute
        return text == own or text.startswith(own + "/")
    return True


def test_jupyter_routes_refuse_a_foreign_origin_and_never_echo_it(cluster: tuple[MasterProcess, str]) -> None:
    """A token-authenticated request to Jupyter's routes from another origin (another host,
    scheme or port, ``null``) is refused and no ``Access-Control-Allow-Origin`` names it;
    ``X-Forwarded-*`` is not trusted to make an origin the master's."""
    master, token = cluster
    own = f"http://127.0.0.1:{master.port}"
    auth = {"Authorization": f"token {token}"}
    status, headers, _ = _exchange(master.port, "GET", "/api/contents", auth)
    assert status == 200 and not any(_header(headers, "access-control-allow-origin")), headers
    status, headers, _ = _exchange(master.port, "GET", "/api/contents", {**auth, "Origin": own})
    assert status == 200 and _header(headers, "access-control-allow-origin") in ([], [own]), headers
    foreign = ["https://evil.example", f"https://127.0.0.1:{master.port}", f"http://127.0.0.1:{master.port + 1}",
               f"http://localhost:{master.port}", "null", f"{own}.evil.example", f"{own}/"]
    for origin in foreign:
        for method, target, headers_ in [
            ("GET", "/api/contents", auth),
            ("GET", f"/api/contents?token={token}", {}),
            ("GET", "/api/kernels", {**auth, "X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example",
                                     "X-Scheme": "https"}),
            ("GET", "/api/sessions", auth),
            ("GET", "/api/status", auth),
            ("GET", "/lab", auth),
        ]:
            status, headers, body = _exchange(master.port, method, target, {**headers_, "Origin": origin})
            assert status == 403, (origin, target, status, body[:200])
            assert not _header(headers, "access-control-allow-origin"), (origin, target, headers)
        # A CORS preflight gets no allowance (Jupyter's skips its origin check for OPTIONS).
        status, headers, _ = _exchange(master.port, "OPTIONS", "/api/contents/x.txt", {
            "Origin": origin, "Access-Control-Request-Method": "PUT",
            "Access-Control-Request-Headers": "authorization, content-type"})
        assert not _header(headers, "access-control-allow-origin"), (origin, status, headers)
    # The https Origin is refused for its scheme: the same one over http passes (above).
    assert f"Origin: https://127.0.0.1:{master.port}" in master.log()


def test_a_cross_origin_write_to_a_jupyter_route_is_refused(cluster: tuple[MasterProcess, str]) -> None:
    """POST/PUT/DELETE to Jupyter's routes with a foreign Origin change nothing, token or
    cookie; the same cookie session from the master's own origin can."""
    master, token = cluster
    own = f"http://127.0.0.1:{master.port}"
    auth = {"Authorization": f"token {token}"}
    opener, xsrf = _jupyter_login(master, token)
    name = f"det-origin-{secrets.token_hex(4)}.txt"
    put = json.dumps({"type": "file", "format": "text", "content": "hello"}).encode()
    kernels = kernel_count(master.url, "/api/kernels", auth)
    for origin in ("https://evil.example", f"https://127.0.0.1:{master.port}", "null"):
        for method, target, body in [("POST", "/api/kernels", b'{"name": "python3"}'),
                                     ("PUT", f"/api/contents/{name}", put),
                                     ("POST", "/api/sessions", b'{"path": "x", "type": "notebook"}')]:
            status, headers, answer = _exchange(master.port, method, target,
                                                {**auth, "Origin": origin, "Content-Type": "application/json"}, body)
            assert status == 403, (origin, method, target, status, answer[:200])
            assert not _header(headers, "access-control-allow-origin"), headers
        # Cookies and the _xsrf a page on another origin could read: refused too, https
        # included (Jupyter's host-only check let that one through).
        code, got, answer = fetch(f"{master.url}/api/contents/{name}",
                                  {"Origin": origin, "X-XSRFToken": xsrf, "Content-Type": "application/json"},
                                  "PUT", put, opener)
        assert code == 403 and "Access-Control-Allow-Origin" not in got, (origin, code, answer[:200])
    assert kernel_count(master.url, "/api/kernels", auth) == kernels
    assert _exchange(master.port, "GET", f"/api/contents/{name}", auth)[0] == 404
    # The control: the cookie session on the master's own origin writes.
    code, _, answer = fetch(f"{master.url}/api/contents/{name}",
                            {"Origin": own, "X-XSRFToken": xsrf, "Content-Type": "application/json"},
                            "PUT", put, opener)
    assert code in (200, 201), answer[:200]
    assert _exchange(master.port, "DELETE", f"/api/contents/{name}", auth)[0] == 204


def test_jupyter_redirects_never_leave_the_host(cluster: tuple[MasterProcess, str]) -> None:
    """Jupyter's trailing-slash handler turned ``/\\evil.com/`` into ``Location: /\\evil.com``
    (``//evil.com`` to a browser): no path gets a redirect off the host."""
    master, _ = cluster
    own = f"http://127.0.0.1:{master.port}"
    paths = ["/%5Cevil.com/", "/\\evil.com/", "//evil.com/", "/\\/evil.com/", "/%2F%2Fevil.com/",
             "/%5C%5Cevil.com/", "/\\\\evil.com/", "///evil.com/", "/%09/evil.com/", "/lab/",
             "/\\evil.com/?x=1", "/.\\evil.com/", "/\\evil.com", "/api/contents/\\evil.com/"]
    checked = 0
    for path in paths:
        for method in ("GET", "HEAD", "POST"):
            status, headers, _ = _exchange(master.port, method, path)
            locations = _header(headers, "location")
            if 300 <= status < 400:
                assert len(locations) == 1 and _stays_on_host(locations[0], own), (method, path, status, locations)
            else:
                assert not locations, (method, path, status, headers)
            checked += 1
    assert _exchange(master.port, "GET", "/\\evil.com/")[0] == 404
    assert checked == 3 * len(paths)


def _login_xsrf(port: int) -> str:
    status, headers, _ = _exchange(port, "GET", "/login")
    assert status == 200, headers
    cookie = next(v for v in _header(headers, "set-cookie") if v.startswith("_xsrf="))
    return cookie.split(";", 1)[0].split("=", 1)[1]


def test_the_login_pages_next(cluster: tuple[MasterProcess, str]) -> None:
    """A CR or LF in ``next`` is a 400; after a login, ``next`` never takes the browser off
    the host."""
    master, token = cluster
    own = f"http://127.0.0.1:{master.port}"
    for query in ("next=%0d%0aSet-Cookie:x=1", "next=%0aSet-Cookie:x=1", "next=/lab%0d",
                  "next=%0d%0a%0d%0a<script>", "a=1&next=%00"):
        for method in ("GET", "POST"):
            status, headers, _ = _exchange(master.port, method, f"/login?{query}")
            assert status == 400, (method, query, status, headers)
            assert not any("x=1" in v for v in _header(headers, "set-cookie")), headers
            assert not _header(headers, "location"), headers
    xsrf = _login_xsrf(master.port)
    nexts = ["https://evil.com", "//evil.com", "/\\evil.com", "\\\\evil.com", "https:/\\evil.com",
             "https:///evil.com", f"{own}@evil.com", f"http://evil.com#{own}", "javascript:alert(1)",
             f"https://127.0.0.1:{master.port}/lab", "/lab"]
    for next_url in nexts:
        form = f"_xsrf={quote(xsrf, safe='')}&password={token}".encode()
        status, headers, body = _exchange(master.port, "POST", f"/login?next={quote(next_url, safe='')}", {
            "Cookie": f"_xsrf={xsrf}", "Content-Type": "application/x-www-form-urlencoded"}, form)
        locations = _header(headers, "location")
        assert status == 302 and len(locations) == 1, (next_url, status, body[:200])
        assert _stays_on_host(locations[0], own), (next_url, locations)
        assert any(v.startswith("username-") for v in _header(headers, "set-cookie")), headers  # logged in


# -- the proxy_port setting ------------------------------------------------------------------

def test_a_fixed_proxy_port_is_used_and_a_taken_one_stops_the_server(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    port = free_port()
    work = tmp_path_factory.mktemp("fixed")
    first = MasterProcess(work / "a", env={"DET_PROXY_PORT": str(port)}, extra_args=["--no-agent"]).start()
    try:
        client = first.admin()
        nb = nbh.launch(client, resources={"slots": 0})  # queued (no agent): its JSON is enough
        assert client.get(f"/api/v1/notebooks/{nb}")["notebook"]["proxyUrl"] == \
            f"http://127.0.0.1:{port}/proxy/{nb}/"
        second = MasterProcess(work / "b", env={"DET_PROXY_PORT": str(port)}, extra_args=["--no-agent"])
        with pytest.raises(RuntimeError) as err:
            second.start(timeout=60)
        assert f"the proxy cannot listen on 127.0.0.1:{port}" in str(err.value)
        assert "DET_PROXY_PORT" in str(err.value) and "Traceback" not in str(err.value)
        bad = MasterProcess(work / "c", env={"DET_PROXY_PORT": "eighty"}, extra_args=["--no-agent"])
        with pytest.raises(RuntimeError) as err:
            bad.start(timeout=60)
        assert "DET_PROXY_PORT='eighty': a port number" in str(err.value), str(err.value)[-800:]
    finally:
        first.stop()
