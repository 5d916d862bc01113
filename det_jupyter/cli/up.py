"""``det-jupyter``: run the master (``up``), stop it (``down``), submit and watch an experiment."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from jupyter_core.paths import jupyter_data_dir

from ..private_files import open_private, private_dir
from ._local import LocalClient, read_state, state_path


def _default_data_dir() -> str:
    return os.environ.get("DET_DATA_DIR") or os.path.join(jupyter_data_dir(), "det-jupyter")


def _serve(args: argparse.Namespace) -> int:
    """Run the Jupyter server with the extension in the foreground."""
    from jupyter_server.serverapp import ServerApp
    from traitlets.config import Config

    data_dir = os.path.abspath(args.data_dir)
    private_dir(data_dir)
    cfg = Config()
    cfg.ServerApp.jpserver_extensions = {"det_jupyter": True}
    cfg.ServerApp.ip = args.host
    cfg.ServerApp.port = args.port
    cfg.ServerApp.port_retries = 0
    cfg.ServerApp.open_browser = False
    cfg.ServerApp.root_dir = os.getcwd()
    if os.geteuid() == 0:
        cfg.ServerApp.allow_root = True
    cfg.DetJupyterApp.data_dir = data_dir
    cfg.DetJupyterApp.kernel_user = "admin"  # the operator's own server: its kernels are admin
    if args.slots is not None:
        cfg.DetJupyterApp.agent_slots = args.slots
    if args.db_url:
        cfg.DetJupyterApp.db_url = args.db_url
    if args.no_agent:
        cfg.DetJupyterApp.embedded_agent = False
    if args.config:
        cfg.DetJupyterApp.master_config = os.path.abspath(args.config)
    if args.agent_pool:
        cfg.DetJupyterApp.agent_resource_pool = args.agent_pool
    if args.task_python:
        cfg.DetJupyterApp.task_python = os.path.abspath(args.task_python)
    if args.agent_reconnect_wait is not None:
        cfg.DetJupyterApp.agent_reconnect_wait = args.agent_reconnect_wait
    app = ServerApp(config=cfg)
    app.initialize(argv=[])
    master = app.web_app.settings["det_master"]
    url = f"http://{args.host}:{app.port}/"
    token = master.auth.session_for("admin")
    state = {"pid": os.getpid(), "url": url, "data_dir": data_dir, "operator_token": token}
    with os.fdopen(open_private(state_path(data_dir), os.O_WRONLY | os.O_TRUNC), "w") as fh:
        json.dump(state, fh)
    print(f"det-jupyter master running at {url}  (data: {data_dir}; stop with: det-jupyter down)", flush=True)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        # Jupyter asks before stopping on Ctrl-C at a terminal; without one it leaves SIGINT to
        # KeyboardInterrupt, which ends the loop without its cleanup: the extension would not
        # stop (its kernel identity file left behind, its tasks not told). Stop as on SIGTERM.
        signal.signal(signal.SIGINT, app._signal_stop)
    try:
        app.start()
    finally:
        try:
            current = read_state(data_dir)
            if current and current.get("pid") == os.getpid():
                os.unlink(state_path(data_dir))
        except OSError:
            pass
    return 0


def _up(args: argparse.Namespace) -> int:
    if not args.detach:
        return _serve(args)
    data_dir = os.path.abspath(args.data_dir)
    private_dir(data_dir)
    existing = read_state(data_dir)
    if existing and _alive(existing["pid"]):
        print(f"det-jupyter is already running at {existing['url']} (pid {existing['pid']})")
        return 0
    log_path = os.path.join(data_dir, "master.log")
    argv = [sys.executable, "-m", "det_jupyter.cli.up", "up", "--port", str(args.port), "--host", args.host,
            "--data-dir", data_dir]
    if args.slots is not None:
        argv += ["--slots", str(args.slots)]
    env = dict(os.environ)
    if args.db_url:  # through the environment, which the master drops once read: a URL may
        env["DET_DB_URL"] = args.db_url  # hold a password, and any user on the host reads argv
    if args.config:
        argv += ["--config", os.path.abspath(args.config)]
    if args.agent_pool:
        argv += ["--agent-pool", args.agent_pool]
    if args.task_python:
        argv += ["--task-python", os.path.abspath(args.task_python)]
    if args.agent_reconnect_wait is not None:
        argv += ["--agent-reconnect-wait", str(args.agent_reconnect_wait)]
    if args.no_agent:
        argv += ["--no-agent"]
    password_file = os.path.join(data_dir, "admin_password")
    had_password = os.path.exists(password_file)
    with os.fdopen(open_private(log_path, os.O_WRONLY | os.O_APPEND), "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            print(f"det-jupyter failed to start (exit {proc.returncode}); see {log_path}", file=sys.stderr)
            return 1
        state = read_state(data_dir)
        if state and state.get("pid") == proc.pid:
            try:
                LocalClient(state).get("/info")
                print(f"det-jupyter master running at {state['url']} (pid {proc.pid}; log {log_path})")
                if not had_password and os.path.exists(password_file):  # never shown in the log
                    print(f"users admin and determined were created; their password is in {password_file}")
                return 0
            except OSError:
                pass
        time.sleep(0.2)
    print(f"det-jupyter did not answer within 60 s; see {log_path}", file=sys.stderr)
    return 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def _down(args: argparse.Namespace) -> int:
    state = read_state(os.path.abspath(args.data_dir))
    if not state or not _alive(state["pid"]):
        print("det-jupyter is not running")
        return 0
    pid = state["pid"]
    os.kill(pid, signal.SIGTERM)
    deadline = time.time() + 20
    while time.time() < deadline and _alive(pid):
        time.sleep(0.2)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
    print(f"det-jupyter (pid {pid}) stopped")
    return 0


def _submit(args: argparse.Namespace) -> int:
    from ._submit import submit_and_watch

    state = read_state(os.path.abspath(args.data_dir))
    if not state:
        print("det-jupyter is not running here; start it with: det-jupyter up --detach", file=sys.stderr)
        return 1
    return submit_and_watch(LocalClient(state), args.config, args.context, wait=args.wait)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="det-jupyter", description="Run and use a det-jupyter master.")
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="run the master with an embedded agent (foreground unless --detach)")
    up.add_argument("--port", type=int, default=int(os.environ.get("DET_PORT", "8080")))
    up.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    up.add_argument("--data-dir", default=_default_data_dir())
    up.add_argument("--slots", type=int, default=None, help="CPU slots of the embedded agent (no GPU)")
    up.add_argument("--db-url", default=None, help="database URL (default: SQLite under the data dir)")
    up.add_argument("--no-agent", action="store_true", help="no embedded agent (agents connect with det-agent)")
    up.add_argument("--config", default=None,
                    help="master.yaml with resource_manager and resource_pools (pools, schedulers)")
    up.add_argument("--agent-pool", default=None, help="resource pool of the embedded agent")
    up.add_argument("--task-python", default=None, metavar="ENV",
                    help="Python environment the embedded agent's tasks run (a virtual environment "
                         "or its python3, e.g. one with determined==0.38.1 for stock configs)")
    up.add_argument("--agent-reconnect-wait", type=float, default=None,
                    help="seconds an agent may stay away before its tasks count as lost (default 25)")
    up.add_argument("-d", "--detach", action="store_true", help="run in the background and return")
    up.set_defaults(func=_up)
    down = sub.add_parser("down", help="stop the master started with up")
    down.add_argument("--data-dir", default=_default_data_dir())
    down.set_defaults(func=_down)
    sm = sub.add_parser("submit", help="create an experiment on the local master and watch it")
    sm.add_argument("config")
    sm.add_argument("context", nargs="?", default=None)
    sm.add_argument("--data-dir", default=_default_data_dir())
    sm.add_argument("--wait", action="store_true", help="wait until it ends; print the best trial")
    sm.set_defaults(func=_submit)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


def _entry() -> Any:
    sys.exit(main())


if __name__ == "__main__":
    _entry()
