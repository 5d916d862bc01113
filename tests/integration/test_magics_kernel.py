"""%det and %%det_experiment in a REAL IPython kernel against a real master, and the one
identity: a kernel started by the master's own Jupyter server reaches it with no login."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from det_jupyter.identity import IDENTITY_ENV as IDENTITY_ENV_NAME
from tests._master import ADMIN_PASSWORD, Client, MasterProcess, wait_experiment

pytest.importorskip("ipykernel", reason="the kernel tests need ipykernel (a product dependency)")
pytestmark = pytest.mark.slow
from tests.integration._kernels import kernelspec_root, running_kernel  # noqa: E402

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
JUPYTER_TOKEN = "kernel-test-" + uuid.uuid4().hex

CELL = """\
import time

import det_harness as det

with det.core.init() as core:
    hp = core.hparams
    for step in range(1, int(hp["steps"]) + 1):
        time.sleep(hp["sleep"])
        core.train.report_training_metrics(step, {"loss": hp["scale"] / step})
        if step % 2 == 0:
            core.train.report_validation_metrics(step, {"validation_loss": hp["scale"] / step})
    print("cell trial done", hp["scale"])
"""


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    work = tmp_path_factory.mktemp("kernel")
    m = MasterProcess(work / "master", env={
        "JUPYTER_RUNTIME_DIR": str(work / "runtime"), "JUPYTER_TOKEN": JUPYTER_TOKEN,
        "DET_JUPYTER_CONFIG_DIR": str(work / "server-cfg"),
        "JUPYTER_PATH": str(kernelspec_root(work / "jupyter")),
    }).start()
    yield m
    m.stop()


class Outputs:
    """What one execute_request produced on IOPub."""

    def __init__(self) -> None:
        self.msgs: list[dict[str, Any]] = []

    def hook(self, msg: dict[str, Any]) -> None:
        self.msgs.append(msg)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [m["content"] for m in self.msgs if m["msg_type"] == kind]

    def stream(self, name: str) -> str:
        return "".join(c["text"] for c in self.of("stream") if c["name"] == name)

    def widget_results(self) -> list[dict[str, Any]]:
        return [c["data"][WIDGET_MIME] for c in self.of("execute_result") + self.of("display_data")
                if WIDGET_MIME in c["data"]]


@pytest.fixture(scope="module")
def kernel(master: MasterProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    cfg = tmp_path_factory.mktemp("kernel-cfg")
    env = {k: v for k, v in os.environ.items()
           if k not in ("DET_MASTER", "DET_USER", "DET_PASS", "DET_JUPYTER_IDENTITY")}
    env.update(DET_MASTER=master.url, DET_JUPYTER_CONFIG_DIR=str(cfg))
    with running_kernel(env, cfg, cfg / "jupyter") as kc:
        yield kc


def run(kc: Any, code: str, timeout: float = 120) -> tuple[dict[str, Any], Outputs]:
    out = Outputs()
    reply = kc.execute_interactive(code, output_hook=out.hook, timeout=timeout)
    return reply["content"], out


def test_det_magics_and_a_cell_experiment_in_a_real_kernel(kernel: Any, master: MasterProcess) -> None:
    reply, out = run(kernel, "from det_jupyter import client\n"
                             f"client.login({master.url!r}, 'admin', {ADMIN_PASSWORD!r}).username")
    assert reply["status"] == "ok", out.msgs
    reply, out = run(kernel, "%load_ext det_jupyter")
    assert reply["status"] == "ok" and not out.of("error"), out.msgs

    # %det e list returns the experiments widget (a widget view, not a table).
    reply, out = run(kernel, "%det e list")
    assert reply["status"] == "ok", out.msgs
    (view,) = out.widget_results()
    assert view["model_id"]

    # %%det_experiment: the cell is the entrypoint, its config from a variable + options.
    reply, out = run(kernel, "hp = {'hyperparameters': {'steps': 6, 'scale': 3.0, 'sleep': 1.0}}")
    assert reply["status"] == "ok"
    reply, out = run(kernel, "%%det_experiment --name cell-exp --metric validation_loss "
                             "--config hp --max-length 6\n" + CELL)
    assert reply["status"] == "ok" and not out.of("error"), out.msgs
    created = out.stream("stdout")
    assert created.startswith("Created experiment "), created
    exp_id = int(created.split()[2])
    assert len(out.widget_results()) == 1

    admin = Client(master.url, master.login())
    assert wait_experiment(admin, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"},
                           timeout=120) == "STATE_COMPLETED"
    exp = admin.get(f"/api/v1/experiments/{exp_id}")["experiment"]
    assert exp["name"] == "cell-exp" and exp["config"]["entrypoint"] == "python3 det_cell.py"
    (trial,) = admin.get(f"/api/v1/experiments/{exp_id}/trials")["trials"]
    assert trial["hparams"] == {"steps": 6, "scale": 3.0, "sleep": 1.0}
    workloads = admin.get(f"/api/v1/trials/{trial['id']}/workloads")["workloads"]
    validation = [w["validation"] for w in workloads if "validation" in w]
    assert [v["totalBatches"] for v in validation] == [2, 4, 6]
    assert validation[-1]["metrics"]["avgMetrics"]["validation_loss"] == pytest.approx(0.5)

    # The widget kept polling in the kernel's background and pushed the final state.
    deadline, updates = time.time() + 10, list[dict[str, Any]]()
    while time.time() < deadline and not any("COMPLETED" in json.dumps(m) for m in updates):
        try:
            msg = kernel.get_iopub_msg(timeout=1)
        except Exception:  # queue.Empty
            continue
        if msg["msg_type"] == "comm_msg":
            updates.append(msg["content"])
    assert any("COMPLETED" in json.dumps(m) for m in updates), "no live widget update arrived"

    # %det e describe, job list, agent list: widgets; master info: the CLI's text.
    for line in (f"%det e describe {exp_id}", "%det job list", "%det agent list"):
        reply, out = run(kernel, line)
        assert reply["status"] == "ok" and len(out.widget_results()) == 1, (line, out.msgs)
    reply, out = run(kernel, "%det master info")
    assert "version:" in out.stream("stdout") and not out.widget_results()


def test_det_e_create_submits_and_returns_the_experiment_widget(
        kernel: Any, master: MasterProcess, tmp_path: Path) -> None:
    from tests.integration._exp import COUNTER, counter_config

    config = tmp_path / "counter.yaml"
    config.write_text(counter_config(length=4, sleep=0.01))
    run(kernel, "%load_ext det_jupyter")
    reply, out = run(kernel, f"%det e create {config} {COUNTER}")
    assert reply["status"] == "ok" and not out.of("error"), out.msgs
    assert out.stream("stdout").startswith("Created experiment "), out.msgs
    exp_id = int(out.stream("stdout").split()[2])
    assert len(out.widget_results()) == 1
    admin = Client(master.url, master.login())
    assert wait_experiment(admin, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}) == "STATE_COMPLETED"


def test_det_model_commands_print_one_line_or_return_the_registry_widget(
        kernel: Any, master: MasterProcess) -> None:
    """``%det model create`` once raised AttributeError (it was taken for ``e create``)."""
    reply, out = run(kernel, "from det_jupyter import client\n"
                             f"client.login({master.url!r}, 'admin', {ADMIN_PASSWORD!r}).username")
    assert reply["status"] == "ok", out.msgs
    run(kernel, "%load_ext det_jupyter")
    reply, out = run(kernel, "%det model create kernel-model --description 'from a kernel'")
    assert reply["status"] == "ok" and not out.of("error"), out.msgs
    assert "Traceback" not in out.stream("stderr") and out.stream("stderr") == "", out.msgs
    assert out.stream("stdout").startswith("Created model kernel-model (id "), out.msgs
    admin = Client(master.url, master.login())
    model = admin.get("/api/v1/models/kernel-model")["model"]
    assert model["description"] == "from a kernel"

    # list and describe: the registry widget (describe: with the model chosen).
    for line in ("%det model list", "%det model ls --all", "%det model describe kernel-model"):
        reply, out = run(kernel, line)
        assert reply["status"] == "ok" and not out.of("error"), (line, out.msgs)
        assert len(out.widget_results()) == 1, (line, out.msgs)
    reply, out = run(kernel, "w = get_ipython().run_line_magic('det', 'model describe kernel-model')\n"
                             "print(type(w).__name__, w.selected.value, 'kernel-model' in w.table.value)")
    assert out.stream("stdout").strip() == f"ModelRegistryWidget {model['id']} True", out.msgs
    reply, out = run(kernel, "%det model list --json")
    assert json.loads(out.stream("stdout"))[0]["name"] == "kernel-model", out.msgs

    # Errors: one line each, never a traceback.
    for line, message in (
            ("%det model create kernel-model", "Error: a model named 'kernel-model' already exists"),
            ("%det model describe no-such-model", "Error: model no-such-model not found"),
            ("%det model register-version kernel-model no-such-uuid",
             "Error: checkpoint no-such-uuid not found")):
        reply, out = run(kernel, line)
        text = out.stream("stderr")
        assert reply["status"] == "ok" and not out.of("error"), (line, out.msgs)
        assert text.startswith(message) and len(text.strip().splitlines()) == 1, (line, text)
    assert admin.get("/api/v1/models/kernel-model")["model"]["numVersions"] == 0


@pytest.mark.parametrize(("line", "stderr"), [
    ("%det e describe 99999", "Error: "),
    ("%det e lst", "UsageError: "),
    ("%%det_experiment --config nope\nprint(1)", "UsageError: --config nope: no such variable"),
    ("%%det_experiment --searcher bogus\nprint(1)", "UsageError: %%det_experiment: argument"),
])
def test_errors_are_one_short_message(kernel: Any, line: str, stderr: str) -> None:
    run(kernel, "%load_ext det_jupyter")
    _reply, out = run(kernel, line)
    text = out.stream("stderr")
    assert stderr in text, out.msgs
    assert "Traceback" not in text and not out.of("error"), out.msgs
    assert len(text.strip().splitlines()) <= 2, text


# -- one identity: a kernel of the master's own Jupyter server ------------------------------

async def _execute_in_server_kernel(base: str, code: str, timeout: float = 60) -> str:
    """Start a kernel through the server's REST API, run ``code`` over its websocket and
    return its stdout (what a notebook in that server does)."""
    from tornado.httpclient import AsyncHTTPClient, HTTPRequest
    from tornado.websocket import websocket_connect

    http = AsyncHTTPClient()
    auth = {"Authorization": f"token {JUPYTER_TOKEN}"}
    resp = await http.fetch(HTTPRequest(f"{base}/api/kernels", method="POST", headers=auth,
                                        body=json.dumps({"name": "python3"})))
    kernel_id = json.loads(resp.body)["id"]
    ws_url = base.replace("http", "ws", 1) + f"/api/kernels/{kernel_id}/channels"
    ws = await websocket_connect(HTTPRequest(ws_url, headers=auth))
    session, msg_id = uuid.uuid4().hex, uuid.uuid4().hex
    ws.write_message(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test",
                   "session": session, "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": False,
                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
    }))
    out: list[str] = []
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            raw = await asyncio.wait_for(ws.read_message(), timeout=deadline - time.time())
            if raw is None:
                break
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("ERROR " + msg["content"]["ename"] + ": " + msg["content"]["evalue"])
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
    finally:
        ws.close()
        await http.fetch(HTTPRequest(f"{base}/api/kernels/{kernel_id}", method="DELETE",
                                     headers=auth))
    return "".join(out)


def test_a_kernel_of_the_masters_jupyter_server_needs_no_login(master: MasterProcess) -> None:
    # The server side: a 0600 identity file with a working admin token (det-jupyter up).
    (path,) = (master.data_dir.parent / "runtime").glob("det-jupyter-identity-*.json")
    assert path.stat().st_mode & 0o077 == 0
    ident = json.loads(path.read_text())
    assert ident["master"] == master.url and ident["username"] == "admin"
    assert Client(master.url, ident["token"]).get("/api/v1/me")["user"]["username"] == "admin"

    # A kernel started by that server: login() with no arguments, then %det.
    code = ("from det_jupyter import client\n"
            "d = client.login()\n"
            "print('USER', d.whoami()['username'], d.master, len(client.list_experiments()) >= 0)\n"
            "%load_ext det_jupyter\n"
            "w = get_ipython().run_line_magic('det', 'e list')\n"
            "print('WIDGET', type(w).__name__)\n")
    text = asyncio.run(_execute_in_server_kernel(master.url, code))
    assert f"USER admin {master.url} True" in text, text
    assert "WIDGET ExperimentsWidget" in text, text


def test_plain_jupyter_server_gives_kernels_the_os_user(tmp_path: Path) -> None:
    """``jupyter server`` with the extension (not ``det-jupyter up``): the kernels' det user is
    the OS user, created as a non-admin; stopping the server removes the file and the session."""
    import getpass
    import signal
    import subprocess

    from tests._master import free_port, wait_for

    port, runtime = free_port(), tmp_path / "runtime"
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime), "DET_ADMIN_PASSWORD": ADMIN_PASSWORD,
           "JUPYTER_TOKEN": JUPYTER_TOKEN}
    env.pop(IDENTITY_ENV_NAME, None)
    log = open(tmp_path / "server.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", f"--port={port}", "--ServerApp.port_retries=0",
         "--ServerApp.open_browser=False", "--ServerApp.jpserver_extensions={'det_jupyter': True}",
         f"--DetJupyterApp.data_dir={tmp_path / 'data'}", "--DetJupyterApp.embedded_agent=False",
         "--allow-root"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path, start_new_session=True)
    try:
        path = wait_for(lambda: next(iter(runtime.glob("det-jupyter-identity-*.json")), None),
                        timeout=60, what="the identity file")
        ident = wait_for(lambda: _read_json(path), what="a complete identity file")
        assert ident["master"] == f"http://127.0.0.1:{port}"
        assert ident["username"] == getpass.getuser()
        me = Client(ident["master"], ident["token"]).get("/api/v1/me")["user"]
        assert me["username"] == getpass.getuser() and me["admin"] is False
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert not path.exists()
    import sqlite3

    from det_jupyter.services.accounts.auth import token_hash

    with contextlib.closing(sqlite3.connect(tmp_path / "data" / "det.db")) as db:
        (revoked,) = db.execute("SELECT revoked FROM user_sessions WHERE token_hash = ?",
                                (token_hash(ident["token"]),)).fetchone()
    assert revoked


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def test_the_shipped_kernel_config_loads_the_magics_by_default(tmp_path: Path) -> None:
    """jupyter-config/ipython/ipython_kernel_config.json (installed to <prefix>/etc/ipython)
    loads the extension in every kernel; here it is a profile's config (IPYTHONDIR), the
    same file read the same way."""
    from tests._master import REPO

    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    shipped = REPO / "jupyter-config" / "ipython" / "ipython_kernel_config.json"
    (profile / "ipython_kernel_config.json").write_text(shipped.read_text())
    env = {**os.environ, "IPYTHONDIR": str(tmp_path / "ipython")}
    with running_kernel(env, tmp_path, tmp_path / "jupyter") as kc:
        reply, out = run(kc, "%det -h")  # no %load_ext
        assert reply["status"] == "ok", out.msgs
        assert out.stream("stdout").startswith("usage: %det"), out.msgs
