"""Shells on a real master and agent: an SSH server in a task, reached only through the
master's websocket tunnel. The real OpenSSH client, run with the command ``det shell open
--show-ssh-command`` prints (its ProxyCommand is ``det shell tunnel``), runs ``echo`` in the
task; a key other than the shell's is refused; another user gets 404 on the shell, its key and
its tunnel; ``det shell kill`` ends it."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tornado import httpclient, websocket

from det_jupyter.services.interactive.ssh import generate_key_pair
from tests._master import ADMIN_PASSWORD, ApiError, Client, MasterProcess, free_port, wait_for

SSH = "/usr/bin/ssh" if os.access("/usr/bin/ssh", os.X_OK) else shutil.which("ssh")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(SSH is None, reason="shell tests need an OpenSSH client (/usr/bin/ssh): "
                                           "apt-get install openssh-client"),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("sh") / "master", slots=2,
                      env={"DET_NOTEBOOK_IDLE_CHECK": "1"}).start()
    yield m
    m.stop()


@pytest.fixture(scope="module")
def cli_env(cluster: MasterProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """DET_MASTER, a private config dir (tokens, shell keys), admin logged in with ``det``."""
    env = {k: v for k, v in os.environ.items() if k not in ("DET_USER", "DET_PASS")}
    env["DET_MASTER"] = cluster.url
    env["DET_JUPYTER_CONFIG_DIR"] = str(tmp_path_factory.mktemp("cli-cfg"))
    det(env, "user", "login", "admin", stdin=ADMIN_PASSWORD + "\n")
    return env


def det(env: dict[str, str], *argv: str, stdin: str = "", ok: bool = True,
        timeout: float = 120) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "det_jupyter.cli.det", *argv], env=env,
                          input=stdin, capture_output=True, text=True, timeout=timeout)
    if ok:
        assert done.returncode == 0, f"det {' '.join(argv)} exited {done.returncode}:\n{done.stderr}"
    assert "Traceback" not in done.stderr
    return done


def launch(client: Client, **config: object) -> dict:
    return client.post("/api/v1/shells", {"config": config})["shell"]


def state(client: Client, shell_id: str) -> str:
    return client.get(f"/api/v1/shells/{shell_id}")["shell"]["state"]


class PortTaken(AssertionError):
    """The shell's port (from 29400 up) was another program's: a master knows only its own."""


def wait_state(client: Client, shell_id: str, wanted: str, timeout: float = 90) -> None:
    def reached() -> bool:
        now = state(client, shell_id)
        if now == "STATE_TERMINATED" != wanted:  # fail at once, saying why
            logs = client.get(f"/api/v1/tasks/{shell_id}/logs")
            text = "".join(r["result"]["log"] for r in (logs if isinstance(logs, list) else [logs]))
            error = PortTaken if "address already in use" in text else AssertionError
            raise error(f"shell {shell_id} ended before {wanted}:\n{text[-1000:]}")
        return now == wanted

    wait_for(reached, timeout=timeout, what=f"shell {shell_id} {wanted}")


def start_shell(client: Client, **config: object) -> str:
    """A running shell. Other masters on this host (parallel test runs: notebooks, benchmarks)
    may hold the first ports of the 29400+ range, which this master cannot know; when a shell
    ends with "address already in use", a placeholder command (sleep, zero slots) takes that
    port in this master's books, and the shell is started again."""
    for _ in range(8):
        shell_id = launch(client, **config)["id"]
        try:
            wait_state(client, shell_id, "STATE_RUNNING")
            # Ready means the port accepts connections; check that it is our sshd that does.
            url = client.url.replace("http://", "ws://") + f"/det-jupyter/tunnel/{shell_id}"
            banner = asyncio.run(first_bytes(url, {"Authorization": f"Bearer {client.token}"}))
            if banner is not None and banner.startswith(b"SSH-2.0-"):
                return shell_id
            wait_state(client, shell_id, "STATE_TERMINATED", timeout=30)
            raise PortTaken(f"shell {shell_id}: another program answered on its port")
        except PortTaken:
            client.post("/api/v1/commands", {"config": {"entrypoint": ["sleep", "3600"],
                                                        "resources": {"slots": 0}}})
    raise AssertionError("every port tried was taken by other programs on this host")


@pytest.fixture(scope="module")
def shell(cluster: MasterProcess) -> str:
    return start_shell(cluster.admin(), resources={"slots": 0})


def ssh_argv(env: dict[str, str], shell_id: str) -> list[str]:
    """The printed command, with BatchMode so nothing ever prompts."""
    printed = det(env, "shell", "open", shell_id, "--show-ssh-command").stdout.strip()
    argv = shlex.split(printed)
    assert Path(argv[0]).name == "ssh" and any("shell tunnel" in a for a in argv), printed
    return [argv[0], "-o", "BatchMode=yes", *argv[1:]]


def run_ssh(argv: list[str], env: dict[str, str], *command: str) -> subprocess.CompletedProcess:
    return subprocess.run([*argv, *command], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)


def test_ssh_runs_echo_in_the_task_through_the_printed_command(
        cluster: MasterProcess, cli_env: dict[str, str], shell: str) -> None:
    argv = ssh_argv(cli_env, shell)
    key = Path(argv[argv.index("-i") + 1])
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    done = run_ssh(argv, cli_env, "echo hello-from-shell")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello-from-shell\n"
    # In the task: its environment, its working directory; exit codes come back.
    done = run_ssh(argv, cli_env, 'echo "$DET_TASK_ID $DET_TASK_TYPE"; pwd; exit 7')
    assert done.returncode == 7, done.stderr
    first, cwd = done.stdout.splitlines()
    assert first == f"{shell} SHELL"
    assert cwd != os.getcwd() and Path(cwd).is_absolute()
    # An interactive shell on a PTY (-tt: ssh has no terminal here), typed into.
    typed = subprocess.run([*argv, "-tt"], env=cli_env, input="tty; echo pty-$((6*7)); exit 4\n",
                           capture_output=True, text=True, timeout=60)
    assert typed.returncode == 4, typed.stderr
    assert "pty-42" in typed.stdout and "/dev/pts/" in typed.stdout, typed.stdout
    # `det shell open ID -- CMD` runs the same ssh itself.
    opened = det(cli_env, "shell", "open", shell, "--", "-o", "BatchMode=yes", "echo", "via-open")
    assert opened.stdout == "via-open\n"
    # A shell is a job like any other.
    jobs = cluster.admin().get("/api/v1/job-queues-v2")["jobs"]
    assert any(j["full"]["entityId"] == shell for j in jobs)


def test_a_key_other_than_the_shells_is_refused(cli_env: dict[str, str], shell: str,
                                                 tmp_path: Path) -> None:
    argv = ssh_argv(cli_env, shell)
    wrong = tmp_path / "wrong.key"
    wrong.write_text(generate_key_pair()[0])
    wrong.chmod(0o600)
    argv[argv.index("-i") + 1] = str(wrong)
    done = run_ssh(argv, cli_env, "echo should-not-run")
    assert done.returncode == 255 and "should-not-run" not in done.stdout
    assert "Permission denied" in done.stderr, done.stderr


async def first_bytes(url: str, headers: dict[str, str], timeout: float = 5.0) -> bytes | None:
    """What the shell's end of the tunnel says first (an SSH server: its banner)."""
    try:
        conn = await websocket.websocket_connect(httpclient.HTTPRequest(url, headers=headers))
    except httpclient.HTTPClientError:
        return None
    try:
        message = await asyncio.wait_for(conn.read_message(), timeout)
    except asyncio.TimeoutError:
        message = None
    conn.close()
    return message if isinstance(message, bytes) else None


async def tunnel_status(url: str, headers: dict[str, str]) -> int:
    try:
        conn = await websocket.websocket_connect(httpclient.HTTPRequest(url, headers=headers))
    except httpclient.HTTPClientError as exc:
        return exc.code
    conn.close()
    return 101


def test_other_users_get_404_on_the_shell_its_key_and_its_tunnel(
        cluster: MasterProcess, cli_env: dict[str, str], shell: str, tmp_path: Path) -> None:
    admin = cluster.admin()
    other = Client(cluster.url, cluster.login("determined", ADMIN_PASSWORD))
    for path in (f"/api/v1/shells/{shell}", ):
        with pytest.raises(ApiError) as err:
            other.get(path)
        assert err.value.status == 404
    with pytest.raises(ApiError) as err:
        other.post(f"/api/v1/shells/{shell}/kill")
    assert err.value.status == 404
    assert shell not in {s["id"] for s in other.get("/api/v1/shells")["shells"]}
    url = cluster.url.replace("http://", "ws://") + f"/det-jupyter/tunnel/{shell}"
    for headers in ({}, {"Authorization": "Bearer not-a-token"},
                    {"Authorization": f"Bearer {other.token}"}):
        assert asyncio.run(tunnel_status(url, headers)) == 404, headers
    assert asyncio.run(tunnel_status(url, {"Authorization": f"Bearer {admin.token}"})) == 101
    # The other user's ssh, through their own tunnel, gets nowhere.
    other_env = {**cli_env, "DET_JUPYTER_CONFIG_DIR": str(tmp_path)}
    det(other_env, "user", "login", "determined", stdin=ADMIN_PASSWORD + "\n")
    refused = det(other_env, "shell", "open", shell, "--show-ssh-command", ok=False)
    assert refused.returncode == 1 and "not found" in refused.stderr
    argv = [a.replace(" -u admin ", " -u determined ") for a in ssh_argv(cli_env, shell)]
    assert any(" -u determined shell tunnel " in a for a in argv), argv
    done = run_ssh(argv, other_env, "echo should-not-run")
    assert done.returncode == 255 and "should-not-run" not in done.stdout
    assert "not found, or not yours" in done.stderr, done.stderr
    # The private key goes to the owner alone: not in listings, not to an admin who is not
    # the owner, never in a response's config.
    theirs = launch(other, resources={"slots": 0})
    assert theirs["privateKey"].startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    seen = admin.get(f"/api/v1/shells/{theirs['id']}")
    assert "privateKey" not in seen["shell"] and seen["shell"]["publicKey"].startswith("ssh-ed25519 ")
    assert "ssh_private_key" not in seen["config"]
    assert all("privateKey" not in s for s in admin.get("/api/v1/shells")["shells"])
    admin.post(f"/api/v1/shells/{theirs['id']}/kill")


def test_a_queued_shell_has_no_tunnel_yet(cluster: MasterProcess, cli_env: dict[str, str]) -> None:
    client = cluster.admin()
    queued = launch(client, resources={"slots": 64})["id"]
    url = cluster.url.replace("http://", "ws://") + f"/det-jupyter/tunnel/{queued}"
    assert asyncio.run(tunnel_status(url, {"Authorization": f"Bearer {client.token}"})) == 503
    assert state(client, queued) == "STATE_QUEUED"
    # Its priority can change while it waits, as a job of its own.
    out = det(cli_env, "shell", "set", "priority", queued, "7").stdout
    assert out == f"Set the priority of shell {queued} to 7\n"
    [job] = [j["full"] for j in client.get("/api/v1/job-queues-v2")["jobs"]
             if j["full"]["entityId"] == queued]
    assert (job["type"], job["priority"]) == ("TYPE_SHELL", 7), job
    client.post(f"/api/v1/shells/{queued}/kill")


def test_det_shell_kill_ends_it(cluster: MasterProcess, cli_env: dict[str, str]) -> None:
    client = cluster.admin()
    # `det shell start` waits for the shell and opens it (here: runs one command).
    started = det(cli_env, "shell", "start", "--config", "resources.slots=0", "--",
                  "-o", "BatchMode=yes", "echo", "started-and-opened")
    assert started.stdout == "started-and-opened\n"
    first = started.stderr.split("Launched shell ")[1].split()[0]
    started = det(cli_env, "shell", "start", "--config", "resources.slots=0", "-d")
    shell_id = started.stdout.split()[-1]
    wait_state(client, shell_id, "STATE_RUNNING")
    argv = ssh_argv(cli_env, shell_id)
    assert run_ssh(argv, cli_env, "echo up").stdout == "up\n"
    listed = det(cli_env, "shell", "list").stdout
    assert shell_id in listed and "RUNNING" in listed
    det(cli_env, "shell", "kill", shell_id, first)
    wait_state(client, shell_id, "STATE_TERMINATED", timeout=30)
    wait_state(client, first, "STATE_TERMINATED", timeout=30)
    done = run_ssh(argv, cli_env, "echo should-not-run")
    assert done.returncode == 255 and "should-not-run" not in done.stdout


def test_idle_shells_are_culled_and_open_sessions_keep_them(
        cluster: MasterProcess, cli_env: dict[str, str]) -> None:
    """idle_timeout 4 s, checked every second: a session quiet for 7 s keeps its shell (an open
    tunnel is use); once it ends, the shell is culled within timeout + check + slack."""
    client = cluster.admin()
    shell_id = start_shell(client, resources={"slots": 0}, idle_timeout="4s")
    argv = ssh_argv(cli_env, shell_id)
    done = run_ssh(argv, cli_env, "sleep 7; echo still-here")
    assert done.stdout == "still-here\n", done.stderr
    ended_at = time.monotonic()
    wait_state(client, shell_id, "STATE_TERMINATED", timeout=20)
    assert time.monotonic() - ended_at <= 4 + 1 + 3
    assert "culled: idle" in client.get(f"/api/v1/shells/{shell_id}")["shell"]["exitStatus"]


def test_local_port_forwarding_reaches_a_port_from_the_task(
        cli_env: dict[str, str], shell: str) -> None:
    """``ssh -L``: a TCP echo server, reached from the task, through the master's tunnel."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def echo() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(1024):
                conn.sendall(data)

    threading.Thread(target=echo, daemon=True).start()
    local = free_port()
    argv = ssh_argv(cli_env, shell)
    proc = subprocess.Popen([*argv, "-N", "-o", "ExitOnForwardFailure=yes",
                             "-L", f"{local}:127.0.0.1:{server.getsockname()[1]}"],
                            env=cli_env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        conn = wait_for(lambda: _connect(local), timeout=30, what="the forwarded port open")
        with conn:
            conn.sendall(b"ping through the task")
            assert conn.recv(1024) == b"ping through the task"
    finally:
        proc.terminate()
        proc.wait(10)
        server.close()


def _connect(port: int) -> socket.socket | None:
    try:
        return socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError:
        return None
