"""A real JupyterHub process for tests and benchmarks: its own config, database and proxy
(configurable-http-proxy from npm, installed by scripts/test.sh outside the clone)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests._master import MasterProcess, free_port, wait_for

#: Where scripts/test.sh installs configurable-http-proxy (npm), outside the clone, by version.
CHP_CACHE = Path(os.environ.get("DET_CHP_DIR", Path.home() / ".cache" / "det-jupyter" / "chp-5.3.0"))


def _chp() -> str | None:
    found = shutil.which("configurable-http-proxy")
    cached = CHP_CACHE / "node_modules" / ".bin" / "configurable-http-proxy"
    return found or (str(cached) if cached.exists() else None)


class Hub:
    """A JupyterHub process with its own config, database and proxy."""

    def __init__(self, work: Path, master_url: str, service_token: str) -> None:
        self.work = work
        self.port, self.api_port, self.proxy_api = free_port(), free_port(), free_port()
        self.admin_token = secrets.token_hex(24)
        self.service_token = service_token
        self.master_url = master_url
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}/hub/api"

    extra = ""  # more jupyterhub_config.py lines

    def write_config(self, chp: str, slots: int) -> Path:
        cfg = self.work / "jupyterhub_config.py"
        cfg.write_text(f"""
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {self.port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {self.api_port}
c.JupyterHub.db_url = "sqlite:///{self.work}/hub.sqlite"
c.JupyterHub.cookie_secret_file = "{self.work}/cookie_secret"
c.JupyterHub.cleanup_servers = False
c.ConfigurableHTTPProxy.command = [{chp!r}]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{self.proxy_api}"
c.ConfigurableHTTPProxy.should_start = True
c.ConfigurableHTTPProxy.auth_token = {secrets.token_hex(16)!r}
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allow_all = True
c.Authenticator.admin_users = {{"boss"}}
c.JupyterHub.spawner_class = "det"
c.DetSpawner.master_url = {self.master_url!r}
c.DetSpawner.slots = {slots}
c.Spawner.http_timeout = 120
c.JupyterHub.services = [
    {{"name": "det-master", "api_token": {self.service_token!r}, "oauth_no_confirm": True,
      "oauth_redirect_uri": {self.master_url + "/det-jupyter/hub/oauth_callback"!r}}},
    {{"name": "tester", "api_token": {self.admin_token!r}}},
]
c.JupyterHub.load_roles = [
    {{"name": "det-master", "scopes": ["read:users", "read:groups", "access:servers"], "services": ["det-master"]}},
    {{"name": "admin", "services": ["tester"]}},
    {{"name": "user", "scopes": ["self", "access:services!service=det-master"]}},
]
""" + self.extra)
        return cfg

    def start(self, chp: str, slots: int = 1) -> None:
        cfg = self.write_config(chp, slots)
        log = open(self.work / "hub.log", "ab")  # noqa: SIM115 - the child holds it
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub", "-f", str(cfg)], cwd=self.work,
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        wait_for(lambda: self._answers(), timeout=60, what="JupyterHub answering")

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"JupyterHub exited {self.proc.returncode}: {self.log()[-3000:]}")
        try:
            return self.api("GET", "/") is not None
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)

    def log(self) -> str:
        return (self.work / "hub.log").read_text(errors="replace")

    def api(self, method: str, path: str, body: object = None, token: str | None = None) -> object:
        req = urllib.request.Request(self.api_url + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"token {token or self.admin_token}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else {}

    def server(self, user: str) -> dict:
        model = self.api("GET", f"/users/{user}")
        assert isinstance(model, dict)
        return model.get("servers", {}).get("", {})


@contextmanager
def hub_cluster(tmp_path: Path, extra: str = "", *, slots: int = 1,
                master_env: dict[str, str] | None = None) -> Iterator[tuple[MasterProcess, Hub]]:
    """A master of ``slots`` slots serving a hub's users (``--hub-api-url``, the service token),
    and the hub (``extra``: more config lines), both stopped at the end. Skips without
    configurable-http-proxy."""
    chp = _chp()
    if chp is None:
        pytest.skip("configurable-http-proxy is not installed (scripts/test.sh installs it with npm "
                    f"into {CHP_CACHE}; or npm install -g configurable-http-proxy)")
    service_token = secrets.token_hex(24)
    hub_api_port = free_port()
    master = MasterProcess(tmp_path / "master", slots=slots,
                           env={"JUPYTERHUB_API_TOKEN": service_token, "DET_NOTEBOOK_IDLE_CHECK": "1",
                                **(master_env or {})},
                           extra_args=["--hub-api-url", f"http://127.0.0.1:{hub_api_port}/hub/api"]).start()
    hub = Hub(tmp_path / "hub", master.url, service_token)
    hub.extra = extra
    hub.work.mkdir()
    hub.api_port = hub_api_port
    try:
        hub.start(chp)
        yield master, hub
    finally:
        hub.stop()
        master.stop()
