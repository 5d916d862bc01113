"""The front door (issue 28): install the wheel, run ``det-jupyter up``, open the URL, log in with
det credentials and land in JupyterLab with the sidebar.

- ``test_wheel_front_door``: the wheel is built once per session (``pip wheel --no-deps``: the
  build hook in setup.py builds the sidebar when needed), installed into a fresh virtual
  environment with no Node on PATH, started with ``det-jupyter up --detach``, and driven by
  headless Chromium (Debian's, as tests/browser): ``/`` leads to the login page, a wrong password
  is refused, det credentials open JupyterLab with the sidebar, which acts as that det user; an
  experiment run by that install shows its curve on the dashboard's experiment page (the chart
  module comes from the wheel).
- The plain HTTP tests run the repository's master: ``/`` -> ``/lab``; Jupyter's login form takes
  det credentials (and refuses wrong ones); ``det notebook start`` with a task Python lacking
  JupyterLab is a 400 naming the install command.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import _wheel
from tests._master import (
    ADMIN_PASSWORD,
    REPO,
    ApiError,
    Client,
    MasterProcess,
    create_experiment,
    wait_for,
)
from tests.integration._exp import COUNTER, counter_config

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("DET_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = REPO / "tests" / "browser" / "artifacts"


# -- plain HTTP: the repository's master ------------------------------------------------------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Browserish:
    """Cookies, XSRF and no automatic redirects: what a browser does with Jupyter's pages."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect
        )

    def request(
        self,
        method: str,
        path: str,
        form: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], str]:
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers=headers or {}
        )
        try:
            with self.opener.open(req, timeout=30) as resp:
                return resp.status, dict(resp.headers), resp.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read().decode(errors="replace")

    def cookie(self, name: str) -> str:
        return next(c.value for c in self.jar if c.name == name and c.value is not None)

    def log_in(self, username: str, password: str) -> tuple[int, dict[str, str], str]:
        status, _, page = self.request("GET", "/login?next=%2Flab")
        assert status == 200, page[:500]
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page)
        assert xsrf, "the login page has no XSRF field"
        assert 'name="username"' in page and 'name="password"' in page, page[:1000]
        return self.request(
            "POST",
            "/login?next=%2Flab",
            {"_xsrf": xsrf.group(1), "username": username, "password": password},
        )


@pytest.fixture(scope="module")
def no_lab_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with nothing installed: a task Python without JupyterLab."""
    env = tmp_path_factory.mktemp("nolab") / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120
    )
    return env


@pytest.fixture(scope="module")
def master(
    tmp_path_factory: pytest.TempPathFactory, no_lab_python: Path
) -> Iterator[MasterProcess]:
    m = MasterProcess(
        tmp_path_factory.mktemp("front-door"),
        slots=1,
        extra_args=["--task-python", str(no_lab_python)],
    )
    m.start()
    try:
        yield m
    finally:
        m.stop()


def test_root_leads_to_lab_and_lab_to_the_login_page(master: MasterProcess) -> None:
    b = Browserish(master.url)
    status, headers, _ = b.request("GET", "/")
    assert status == 302 and urllib.parse.urlsplit(headers["Location"]).path == "/lab", (
        status,
        headers,
    )
    status, headers, _ = b.request("GET", "/lab")
    assert status == 302, status
    location = urllib.parse.urlsplit(headers["Location"])
    assert location.path == "/login" and urllib.parse.parse_qs(location.query)["next"] == ["/lab"]


def test_jupyter_login_takes_det_credentials(master: MasterProcess) -> None:
    admin = master.admin()
    admin.post(
        "/api/v1/users",
        {
            "user": {"username": "frontdoor", "active": True, "admin": True},
            "password": "Front-Door-1",
        },
    )
    admin.post(
        "/api/v1/users",
        {"user": {"username": "visitor", "active": True}, "password": "Visitor-Pass-1"},
    )
    wrong = Browserish(master.url)
    status, _, page = wrong.log_in("frontdoor", "not-the-password")
    assert status == 401 and "Invalid credentials" in page
    assert wrong.request("GET", "/lab")[0] == 302  # still not logged in
    # The Lab's kernels run as the master's own account: a det user who is no admin is refused,
    # told why and what to use instead.
    status, _, page = wrong.log_in("visitor", "Visitor-Pass-1")
    assert status == 401 and "Only admins" in page and "det notebook start" in page, page[-1500:]
    assert wrong.request("GET", "/lab")[0] == 302

    b = Browserish(master.url)
    status, headers, page = b.log_in("frontdoor", "Front-Door-1")
    assert status == 302 and urllib.parse.urlsplit(headers["Location"]).path == "/lab", (
        status,
        page[:500],
    )
    assert b.request("GET", "/lab")[0] == 200
    # One identity: the Lab session is that det user, and the sidebar's session is theirs.
    status, _, body = b.request(
        "POST", "/det-jupyter/session", headers={"X-XSRFToken": b.cookie("_xsrf")}
    )
    assert status == 200, body
    session = json.loads(body)
    assert session["username"] == "frontdoor"
    assert Client(master.url, session["token"]).get("/api/v1/me")["user"]["username"] == "frontdoor"
    # Logging that det session out ends the Lab session too.
    Client(master.url, session["token"]).post("/api/v1/auth/logout")
    assert b.request("GET", "/lab")[0] == 302


def test_notebook_refused_when_the_task_python_lacks_jupyterlab(
    master: MasterProcess, no_lab_python: Path
) -> None:
    admin = master.admin()
    with pytest.raises(ApiError) as err:
        admin.post("/api/v1/notebooks", {"config": {"resources": {"slots": 0}}})
    assert err.value.status == 400, err.value.body
    text = json.dumps(err.value.body)
    assert "pip install jupyterlab" in text and str(no_lab_python) in text, text
    # Nothing was queued.
    assert admin.get("/api/v1/notebooks").get("notebooks", []) == []


def test_preflight_sees_what_a_python_has(no_lab_python: Path) -> None:
    from det_jupyter.errors import InvalidRequest
    from det_jupyter.services.interactive._preflight import Preflight

    flight = Preflight()
    flight.register("default", str(no_lab_python / "bin" / "python3"))
    with pytest.raises(InvalidRequest, match=r"det-jupyter\[tensorboard\]"):
        flight.check("TENSORBOARD", "default")
    flight.check("TENSORBOARD", "elsewhere")  # another pool's agents: not known here
    flight.check("SHELL", "default")  # needs nothing
    flight.register("default", sys.executable)  # this environment: JupyterLab is a dependency
    flight.check("NOTEBOOK", "default")


def test_a_failed_detached_start_says_why(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "det_jupyter.cli.up",
                "up",
                "--detach",
                "--port",
                str(port),
                "--data-dir",
                str(tmp_path / "data"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "DET_ADMIN_PASSWORD": ADMIN_PASSWORD},
        )
    assert done.returncode == 1, done
    assert f"port {port} is not available" in done.stderr, done.stderr
    assert str(tmp_path / "data" / "master.log") in done.stderr
    # The help lists the proxy's port and the data dir up, down and submit share.
    help_text = subprocess.run(
        [sys.executable, "-m", "det_jupyter.cli.up", "up", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "--proxy-port" in help_text and "DET_PROXY_PORT" in help_text and "--open" in help_text
    down = subprocess.run(
        [sys.executable, "-m", "det_jupyter.cli.up", "down", "--data-dir", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert f"not running from {tmp_path / 'x'}" in down


# -- the wheel, in a fresh environment without Node, through Chromium ------------------------


def test_wheel_front_door(wheel_env: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; scripts/test.sh does)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the playwright package (test extra)"
    )
    venv, env = wheel_env
    bin_dir = venv / "bin"

    # The installed package: the prebuilt sidebar and the server extension, as Jupyter sees them.
    labext = subprocess.run(
        [str(bin_dir / "jupyter"), "labextension", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert re.search(r"det-jupyter v\S+ +enabled +OK", _wheel.plain(labext)), labext
    serverext = subprocess.run(
        [str(bin_dir / "jupyter"), "server", "extension", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert re.search(r"det_jupyter +enabled", _wheel.plain(serverext)), serverext

    master = _wheel.UpMaster(venv, env, tmp_path / "root")
    up = master.start()
    url = master.url
    assert f"open {url}/" in up.stdout and "log in" in up.stdout, up.stdout
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
            )
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.set_default_timeout(60_000)
                page.goto(url + "/")
                page.wait_for_url(re.compile(r"/login\?next="))
                page.locator("#username_input").wait_for()
                page.screenshot(path=str(ARTIFACTS / "front_door_login.png"))

                page.fill("#username_input", "admin")
                page.fill("#password_input", "wrong-" + ADMIN_PASSWORD)
                page.click("#login_submit")
                sync_api.expect(page.locator("#login_error")).to_contain_text("Invalid credentials")
                assert "/login" in page.url

                page.fill("#username_input", "admin")
                page.fill("#password_input", ADMIN_PASSWORD)
                page.click("#login_submit")
                page.wait_for_url(re.compile(r"/lab"))
                page.locator('.jp-SideBar li[data-id="det-jupyter-sidebar"]').click()
                sidebar = page.locator("#det-jupyter-sidebar")
                sidebar.wait_for(state="visible")
                sync_api.expect(sidebar.locator('[data-det="content"]')).to_be_visible()
                assert not sidebar.locator('[data-det="login"]').is_visible()
                page.screenshot(path=str(ARTIFACTS / "front_door_lab.png"))
                xsrf = next(c["value"] for c in page.context.cookies() if c["name"] == "_xsrf")
                session = page.request.post(
                    url + "/det-jupyter/session", headers={"X-XSRFToken": xsrf}
                )
                assert session.ok and session.json()["username"] == "admin", session.text()

                # The dashboard, from the wheel: an experiment run by this install, its page
                # drawn by the chart module the wheel carries.
                admin = Client(url, session.json()["token"])
                exp_id = create_experiment(admin, counter_config(length=8, ckpt_every=4), COUNTER)["experiment"]["id"]
                wait_for(lambda: admin.get(f"/api/v1/experiments/{exp_id}")["experiment"]["state"]
                         in ("STATE_COMPLETED", "STATE_ERROR"), timeout=120, what=f"experiment {exp_id}")
                assert admin.get(f"/api/v1/experiments/{exp_id}")["experiment"]["state"] == "STATE_COMPLETED"
                chart_js = page.request.get(url + "/det-jupyter/chart.js")
                assert chart_js.ok and "export default" in chart_js.text()
                sidebar.locator('[data-det="dash-experiments"]').click()
                page.locator(f'#det-dash-experiments tr[data-key="{exp_id}"] td[data-col="name"]').click()
                curves = page.locator(f'#det-dash-experiment-{exp_id} [data-det="curves"]')
                sync_api.expect(curves.locator("path.det-chart-line")).to_have_count(1)
                page.screenshot(path=str(ARTIFACTS / "front_door_dashboard.png"))
            finally:
                browser.close()
    finally:
        master.stop()


def test_editable_install_finds_the_sidebar_and_the_server_extension(tmp_path: Path) -> None:
    """A clone's ``pip install -e .`` in a fresh environment: Jupyter sees the prebuilt sidebar
    and the server extension's config (data files, installed in editable mode by setup.py)."""
    if (why := _wheel.cannot_build()) is not None:
        pytest.skip(why)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "JUPYTER_PATH")
    }
    env.update(HOME=str(tmp_path), JUPYTER_PLATFORM_DIRS="1")
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-e", str(REPO)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    jupyter = str(venv / "bin" / "jupyter")
    labext = subprocess.run(
        [jupyter, "labextension", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert re.search(r"det-jupyter v\S+ +enabled +OK", _wheel.plain(labext)), labext
    serverext = subprocess.run(
        [jupyter, "server", "extension", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert re.search(r"det_jupyter +enabled", _wheel.plain(serverext)), serverext
