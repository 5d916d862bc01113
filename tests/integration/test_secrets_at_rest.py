"""Secrets at rest on a real master (issue: task isolation, parts 3-5).

``det-jupyter up --detach`` on a data dir an older version left with loose modes: the dir ends
0700 and every file holding a secret 0600 (the database and its WAL files, the log, the
generated admin password, the agent token, the proxy and sealing keys, the state file, the
kernel identity file). With a notebook and a shell running, neither the database (SQLite's files
byte for byte; PostgreSQL's rows as text) nor the log holds the admin password, the notebook's
upstream token, the shell's private key or Jupyter's own token. A weak ``DET_ADMIN_PASSWORD``
stops the start with a message; SIGINT and SIGTERM of a foreground start remove the kernel
identity file.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests._master import Client, MasterProcess, free_port, wait_for
from tests.conftest import PG_DSN, PG_SKIP, fresh_pg_database

pytestmark = pytest.mark.slow

#: Files of the data dir that hold a secret (SQLite's three only on SQLite).
SECRET_FILES = ["admin_password", "agent_token", "proxy_secret", "secrets_key", "master.json",
                "master.log"]
SQLITE_FILES = ["det.db", "det.db-wal", "det.db-shm"]
OLD_AGENT_TOKEN = "a9" * 32


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _env(runtime: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DET_ADMIN_PASSWORD", "DET_MASTER", "DET_DB_URL", "DET_AGENT_TOKEN")}
    return {**env, "JUPYTER_RUNTIME_DIR": str(runtime), "DET_JUPYTER_STRICT_AUTHZ": "1", **extra}


def _cli(*argv: str, env: dict[str, str], timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "det_jupyter.cli.up", *argv], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


@dataclass
class Detached:
    data_dir: Path
    runtime: Path
    db_url: str | None
    admin: Client
    password: str


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def detached(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Detached]:
    """``det-jupyter up --detach`` with a generated admin password, on a data dir whose dir,
    log and agent token an older version left world-readable."""
    db_url = None
    if request.param == "postgres":
        if not PG_DSN:
            pytest.skip(PG_SKIP)
        db_url = fresh_pg_database()
    work = tmp_path_factory.mktemp("at-rest")
    data_dir, runtime = work / "data", work / "runtime"
    data_dir.mkdir(mode=0o755)
    runtime.mkdir(mode=0o700)
    data_dir.chmod(0o755)
    for name, text in (("master.log", "an older start\n"), ("agent_token", OLD_AGENT_TOKEN + "\n")):
        (data_dir / name).write_text(text)
        (data_dir / name).chmod(0o644)
    argv = ["up", "--detach", "--port", str(free_port()), "--data-dir", str(data_dir), "--slots", "2"]
    env = _env(runtime)
    done = _cli(*argv, *(["--db-url", db_url] if db_url else []), env=env)
    assert done.returncode == 0, f"{done.stdout}{done.stderr}{_log(data_dir)[-3000:]}"
    try:
        state = json.loads((data_dir / "master.json").read_text())
        password = (data_dir / "admin_password").read_text().strip()
        # The terminal of a detached start is told where the password is, not the password.
        assert str(data_dir / "admin_password") in done.stdout
        assert password not in done.stdout + done.stderr
        token = Client(state["url"]).post("/api/v1/auth/login",
                                          {"username": "admin", "password": password})["token"]
        admin = Client(state["url"], token)
        wait_for(lambda: admin.get("/api/v1/agents")["agents"], what="the embedded agent")
        yield Detached(data_dir, runtime, db_url, admin, password)
    finally:
        _cli("down", "--data-dir", str(data_dir), env=env)


def _log(data_dir: Path) -> str:
    try:
        return (data_dir / "master.log").read_text(errors="replace")
    except OSError:
        return ""


def test_the_data_dir_and_every_secret_file_are_private(detached: Detached) -> None:
    d = detached.data_dir
    assert mode(d) == 0o700
    files = SECRET_FILES + ([] if detached.db_url else SQLITE_FILES)
    assert {name: oct(mode(d / name)) for name in files} == {name: oct(0o600) for name in files}
    identity = list(detached.runtime.glob("det-jupyter-identity-*.json"))
    assert len(identity) == 1 and mode(identity[0]) == 0o600
    assert (d / "agent_token").read_text().strip() == OLD_AGENT_TOKEN  # tightened, not replaced
    assert "an older start" in _log(d)


def _upstream_token(task_id: str) -> str:
    """The notebook's upstream token, from its JupyterLab's environment (JUPYTER_TOKEN)."""
    marker = f"--ServerApp.base_url=/proxy/{task_id}/".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for entry in environ:
            if entry.startswith(b"JUPYTER_TOKEN="):
                return entry.split(b"=", 1)[1].decode()
    return ""


def _database_text(detached: Detached) -> bytes:
    """Everything the database holds: SQLite's files as they are on disk, or every row of every
    PostgreSQL table as text."""
    if detached.db_url is None:
        return b"".join((detached.data_dir / n).read_bytes() for n in SQLITE_FILES
                        if (detached.data_dir / n).exists())
    import psycopg

    out = []
    with psycopg.connect(detached.db_url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        for table in tables:
            out += [str(r[0]) for r in conn.execute(f'SELECT x::text FROM "{table}" x')]
    assert any("proxy_token" in s or "sealed1:" in s for s in out)  # the rows were read
    return "\n".join(out).encode()


def test_no_secret_in_the_database_or_the_log(detached: Detached) -> None:
    # Its work dir where the task's account may write (the data dir is the master's alone).
    work_dir = Path(tempfile.mkdtemp(prefix="det-test-shared-"))
    work_dir.chmod(0o1777)
    try:
        _check_no_secret_at_rest(detached, work_dir)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _check_no_secret_at_rest(detached: Detached, work_dir: Path) -> None:
    admin = detached.admin
    nb_id = admin.post("/api/v1/notebooks", {"config": {"resources": {"slots": 0},
                                                        "work_dir": str(work_dir / "nb")}}
                       )["notebook"]["id"]
    shell_id = admin.post("/api/v1/shells", {"config": {"resources": {"slots": 0}}})["shell"]["id"]
    for kind, task_id in (("notebook", nb_id), ("shell", shell_id)):
        wait_for(lambda k=kind, i=task_id: admin.get(f"/api/v1/{k}s/{i}")[k]["state"]
                 == "STATE_RUNNING", timeout=180, what=f"{kind} {task_id} running")
    upstream = wait_for(lambda: _upstream_token(nb_id), what="the notebook's JupyterLab process")
    private_key = admin.get(f"/api/v1/shells/{shell_id}")["shell"]["privateKey"]
    assert "PRIVATE KEY" in private_key
    jpserver = next(detached.runtime.glob("jpserver-*.json"))
    secrets = {
        "the admin password": detached.password,
        "the notebook's upstream token": upstream,
        "Jupyter's token": json.loads(jpserver.read_text())["token"],
        # The key's base64 lines (its PEM's newlines are escaped in the stored JSON).
        **{f"line {i} of the shell's private key": line
           for i, line in enumerate(private_key.splitlines())
           if not line.startswith("-----")},
    }
    assert all(secrets.values())
    database, log = _database_text(detached), _log(detached.data_dir)
    for what, value in secrets.items():
        assert value.encode() not in database, f"the database holds {what}"
        assert value not in log, f"master.log holds {what}"
    assert str(detached.data_dir / "admin_password") in log  # the log says where it is


@pytest.mark.parametrize("password", ["Sh0rtAb", "no-upper-1", "NO-LOWER-1", "No-Digits-Here"])
def test_a_weak_bootstrap_password_is_refused(password: str, tmp_path: Path) -> None:
    done = _cli("up", "--port", str(free_port()), "--data-dir", str(tmp_path / "data"),
                "--no-agent", env=_env(tmp_path, DET_ADMIN_PASSWORD=password), timeout=60)
    assert done.returncode != 0
    assert "DET_ADMIN_PASSWORD must have" in done.stderr and "policy" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert password not in done.stdout + done.stderr
    assert not (tmp_path / "data" / "det.db").exists()  # refused before the database


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_the_kernel_identity_file_goes_when_the_master_stops(sig: signal.Signals,
                                                              tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    master = MasterProcess(tmp_path / "master", extra_args=["--no-agent"],
                           env={"JUPYTER_RUNTIME_DIR": str(runtime)}).start()
    try:
        identity = wait_for(lambda: list(runtime.glob("det-jupyter-identity-*.json")),
                            what="the kernel identity file")
        assert mode(identity[0]) == 0o600
        assert master.proc is not None
        master.proc.send_signal(sig)
        assert master.proc.wait(timeout=30) == 0
        assert list(runtime.glob("det-jupyter-identity-*.json")) == [], master.log()[-2000:]
        assert "master.json" not in os.listdir(master.data_dir)
    finally:
        master.stop()
