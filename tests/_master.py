"""A real det-jupyter master in a subprocess, for integration tests."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ADMIN_PASSWORD = "Test-Passw0rd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ApiError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


class Client:
    """A tiny JSON client (urllib) so tests depend on nothing but the master."""

    def __init__(self, url: str, token: str | None = None, headers: dict[str, str] | None = None) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.headers = dict(headers or {})

    def request(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
                timeout: float = 30) -> Any:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        for k, v in self.headers.items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                text = resp.read()
        except urllib.error.HTTPError as exc:
            payload = exc.read()
            try:
                parsed = json.loads(payload)
            except ValueError:
                parsed = payload.decode(errors="replace")
            raise ApiError(exc.code, parsed) from None
        if not text:
            return {}
        try:
            return json.loads(text)
        except ValueError:
            return [json.loads(line) for line in text.splitlines() if line.strip()]

    def get(self, path: str, **kw: Any) -> Any:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Any:
        return self.request("POST", path, body if body is not None else {}, **kw)


class MasterProcess:
    """``det-jupyter up`` on a free port and a private data dir; restartable; SIGKILL-able."""

    def __init__(self, data_dir: Path, *, slots: int = 2, db_url: str | None = None,
                 env: dict[str, str] | None = None, extra_args: list[str] | None = None,
                 cwd: Path | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.slots = slots
        self.db_url = db_url
        self.env = env or {}
        self.extra_args = extra_args or []
        self.cwd = cwd  # the master's working directory (None: this process's)
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir / "test-master.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> MasterProcess:
        """Start the master and wait until it answers (and its agent registered). A port
        ``free_port`` gave can be taken before the master binds it (as the local end of
        another process's connection): the master then exits saying so, and starts again on
        another port, three times at most."""
        for _ in range(3):
            mark = self.log_path.stat().st_size if self.log_path.exists() else 0
            try:
                return self._start(timeout)
            except RuntimeError:
                since = self.log_path.read_bytes()[mark:].decode(errors="replace")
                if f"port {self.port} is not available" not in since:
                    raise
            self.port = free_port()
        return self._start(timeout)

    def _start(self, timeout: float) -> MasterProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "det_jupyter.cli.up", "up", "--port", str(self.port),
                "--data-dir", str(self.data_dir), "--slots", str(self.slots), *self.extra_args]
        if self.db_url:
            argv += ["--db-url", self.db_url]
        env = {**os.environ, "DET_ADMIN_PASSWORD": ADMIN_PASSWORD, "DET_JUPYTER_STRICT_AUTHZ": "1",
               **self.env}
        env.pop("DET_MASTER", None)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                     stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.cwd)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"master exited {self.proc.returncode}:\n{self.log()[-3000:]}")
            try:
                Client(self.url).get("/info", timeout=2)
                if "--no-agent" in self.extra_args or self._agent_ready():
                    return self
            except (OSError, ApiError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"master did not start:\n{self.log()[-3000:]}")

    def _agent_ready(self) -> bool:
        try:
            agents = self.admin().get("/api/v1/agents")["agents"]
        except (OSError, ApiError):
            return False
        return bool(agents)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def login(self, username: str = "admin", password: str = ADMIN_PASSWORD) -> str:
        return Client(self.url).post("/api/v1/auth/login", {"username": username, "password": password})["token"]

    def admin(self) -> Client:
        return Client(self.url, self.login())

    def kill9(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def start_agent(master: MasterProcess, work: Path, agent_id: str, *, slots: int = 2,
                url: str | None = None, token: str | None = None, extra: tuple[str, ...] = (),
                env: dict[str, str] | None = None) -> subprocess.Popen:
    """``det-agent`` as its own process, logging to ``work/<agent_id>.log`` (``url``: reach the
    master another way, e.g. through a relay; ``token``: other than the master's own;
    ``extra``: more flags; ``env``: variables over this process's)."""
    if token is None:
        token = (master.data_dir / "agent_token").read_text().strip()
    log = open(work / f"{agent_id}.log", "ab")
    return subprocess.Popen(
        [sys.executable, "-m", "det_agent", "--master", url or master.url, f"--token={token}",
         "--id", agent_id, "--slots", str(slots), "--work-dir", str(work / agent_id), *extra],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env=None if env is None else {**os.environ, **env},
    )


@contextlib.contextmanager
def bare_cluster(work: Path) -> Iterator[tuple[MasterProcess, list[subprocess.Popen]]]:
    """A master with no embedded agent, and a list the test puts its agent processes in;
    the agents still running and the master are stopped on exit."""
    master = MasterProcess(work / "master", extra_args=["--no-agent"]).start()
    procs: list[subprocess.Popen] = []
    try:
        yield master, procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
        master.stop()


@contextlib.contextmanager
def agent_cluster(work: Path, agents: dict[str, int]) -> Iterator[MasterProcess]:
    """A master with no embedded agent and a ``det-agent`` process per ``{id: slots}``, all
    connected; everything stopped on exit."""
    with bare_cluster(work) as (master, procs):
        procs += [start_agent(master, work, agent_id, slots=slots) for agent_id, slots in agents.items()]
        client = master.admin()
        wait_for(lambda: len(client.get("/api/v1/agents")["agents"]) == len(agents),
                 what=f"{len(agents)} agents connected")
        yield master


def wait_for(predicate: Any, timeout: float = 60, interval: float = 0.2, what: str = "condition") -> Any:
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value {last!r}")


def context_files(directory: Path) -> list[dict]:
    from det_jupyter.config import read_context_dir

    return read_context_dir(str(directory))


def create_experiment(client: Client, config_text: str, context_dir: Path | None, **extra: Any) -> dict:
    files = context_files(context_dir) if context_dir else []
    return client.post("/api/v1/experiments", {"config": config_text, "modelDefinition": files, **extra})


def experiment_state(client: Client, exp_id: int) -> str:
    return client.get(f"/api/v1/experiments/{exp_id}")["experiment"]["state"]


def wait_experiment(client: Client, exp_id: int, states: set[str], timeout: float = 120) -> str:
    return wait_for(lambda: (s := experiment_state(client, exp_id)) in states and s, timeout=timeout,
                    what=f"experiment {exp_id} in {states}")
