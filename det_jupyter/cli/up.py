"""``det-jupyter``: run the master (``up``), stop it (``down``), submit and watch an experiment."""

from __future__ import annotations

import argparse
import json
import os
import re
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
    # The front door: / leads to JupyterLab, whose login page takes det user names and
    # passwords (server_ext._identity); the Lab session is that det user.
    cfg.ServerApp.default_url = "/lab"
    cfg.ServerApp.identity_provider_class = "det_jupyter.server_ext._identity.DetIdentityProvider"
    cfg.ServerApp.open_browser = bool(args.open)
    cfg.ServerApp.use_redirect_file = False
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
    if args.runtime:
        cfg.DetJupyterApp.agent_runtime = args.runtime
    if args.agent_reconnect_wait is not None:
        cfg.DetJupyterApp.agent_reconnect_wait = args.agent_reconnect_wait
    if args.hub_api_url:
        cfg.DetJupyterApp.hub_api_url = args.hub_api_url
    if args.hub_url:
        cfg.DetJupyterApp.hub_url = args.hub_url
    if args.proxy_port is not None:
        cfg.DetJupyterApp.proxy_port = args.proxy_port
    app = ServerApp(config=cfg)
    app.initialize(argv=[])
    master = app.web_app.settings["det_master"]
    url = f"http://{args.host}:{app.port}/"
    token = master.auth.session_for("admin")
    origin = master.notebooks.proxy_origin
    state = {"pid": os.getpid(), "url": url, "data_dir": data_dir, "operator_token": token,
             **({"proxy_url": origin.url()} if origin is not None else {})}
    with os.fdopen(open_private(state_path(data_dir), os.O_WRONLY | os.O_TRUNC), "w") as fh:
        json.dump(state, fh)
    proxy = f"; notebooks and TensorBoards at {origin.url()}" if origin is not None else ""
    print(f"det-jupyter master running at {url}  (data: {data_dir}{proxy}; stop with: "
          "det-jupyter down)", flush=True)
    print(_login_hint(url, os.path.join(data_dir, "admin_password")), flush=True)
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


def _login_hint(url: str, password_file: str) -> str:
    """What to open and how to log in (Jupyter's login page takes a det admin's credentials)."""
    where = (f"; admin's password is in {password_file}" if os.path.exists(password_file)
             else "")
    return f"open {url} (JupyterLab) and log in with a det admin's user name and password{where}"


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
    if args.runtime:
        argv += ["--runtime", args.runtime]
    if args.agent_reconnect_wait is not None:
        argv += ["--agent-reconnect-wait", str(args.agent_reconnect_wait)]
    if args.hub_api_url:
        argv += ["--hub-api-url", args.hub_api_url]
    if args.hub_url:
        argv += ["--hub-url", args.hub_url]
    if args.no_agent:
        argv += ["--no-agent"]
    if args.proxy_port is not None:
        argv += ["--proxy-port", str(args.proxy_port)]
    password_file = os.path.join(data_dir, "admin_password")
    had_password = os.path.exists(password_file)
    with os.fdopen(open_private(log_path, os.O_WRONLY | os.O_APPEND), "ab") as log:
        log_start = log.seek(0, os.SEEK_END)
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            reason = _log_tail(log_path, log_start)
            print(f"det-jupyter failed to start (exit {proc.returncode}):\n{reason}\n(the whole log: "
                  f"{log_path})", file=sys.stderr)
            return 1
        state = read_state(data_dir)
        if state and state.get("pid") == proc.pid:
            try:
                LocalClient(state).get("/info")
                print(f"det-jupyter master running at {state['url']} (pid {proc.pid}; log {log_path})")
                if state.get("proxy_url"):
                    print(f"notebooks and TensorBoards are served at {state['proxy_url']}/proxy/<task id>/")
                if not had_password and os.path.exists(password_file):  # never shown in the log
                    print(f"users admin and determined were created; their password is in {password_file}")
                print(_login_hint(state["url"], password_file))
                if args.open:
                    import webbrowser

                    webbrowser.open(state["url"])
                return 0
            except OSError:
                pass
        time.sleep(0.2)
    print(f"det-jupyter did not answer within 60 s:\n{_log_tail(log_path, log_start)}\n(the whole "
          f"log: {log_path})", file=sys.stderr)
    return 1


def _log_tail(path: str, start: int, lines: int = 12) -> str:
    """The last ``lines`` lines the master wrote to its log from offset ``start`` on: the reason
    a detached start failed (a taken port, a bad config) is there, not only its path."""
    try:
        with open(path, "rb") as fh:
            fh.seek(start)
            text = fh.read().decode(errors="replace")
    except OSError as exc:
        return f"  (the log cannot be read: {exc})"
    written = [line for line in text.splitlines() if line.strip()]
    # Its error lines (Jupyter's [E]/[C] lines, an exception, the extension's own SystemExit
    # messages) say why; without any, the last lines.
    errors = [line for line in written
              if line.startswith(("[E ", "[C ", "det-jupyter:")) or _EXCEPTION.match(line)]
    shown = errors[-lines:] if errors else written[-lines:]
    return "\n".join(f"  {line}" for line in shown) or "  (the master wrote nothing)"


#: The last line of a traceback: ``SomeError: message``.
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b:?")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def _down(args: argparse.Namespace) -> int:
    data_dir = os.path.abspath(args.data_dir)
    state = read_state(data_dir)
    if not state or not _alive(state["pid"]):
        print(f"det-jupyter is not running from {data_dir} (a master started with another "
              "--data-dir or DET_DATA_DIR: give the same here)")
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


_DATA_DIR_HELP = ("the master's data dir (database, secrets, state of the running master); up, "
                  "down and submit must agree on it (default: env DET_DATA_DIR, else "
                  "%(default)s)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="det-jupyter", description="Run and use a det-jupyter master.")
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="run the master with an embedded agent (foreground unless --detach)")
    up.add_argument("--port", type=int, default=int(os.environ.get("DET_PORT", "8080")),
                    help="port of JupyterLab and the det REST API (default: env DET_PORT, else 8080)")
    up.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    up.add_argument("--data-dir", default=_default_data_dir(), help=_DATA_DIR_HELP)
    up.add_argument("--slots", type=int, default=None, help="CPU slots of the embedded agent (no GPU)")
    up.add_argument("--db-url", default=None, help="database URL (default: SQLite under the data dir)")
    up.add_argument("--no-agent", action="store_true", help="no embedded agent (agents connect with det-agent)")
    up.add_argument("--config", default=None,
                    help="master.yaml with resource_manager and resource_pools (pools, schedulers)")
    up.add_argument("--agent-pool", default=None, help="resource pool of the embedded agent")
    up.add_argument("--task-python", default=None, metavar="ENV",
                    help="Python environment the embedded agent's tasks run (a virtual environment "
                         "or its python3, e.g. one with determined==0.38.1 for stock configs)")
    up.add_argument("--runtime", choices=["auto", "docker", "process"], default=None,
                    help="how the embedded agent runs tasks: auto (default: a config with "
                         "environment.image runs in a Docker container when an engine answers at "
                         "DOCKER_HOST or /var/run/docker.sock), docker, or process")
    up.add_argument("--agent-reconnect-wait", type=float, default=None,
                    help="seconds an agent may stay away before its tasks count as lost (default 25)")
    up.add_argument("--hub-api-url", default=None, metavar="URL",
                    help="serve a JupyterHub's users: accept the tokens the hub at URL "
                         "(http://HUB/hub/api) issued; its service token in JUPYTERHUB_API_TOKEN "
                         "(docs/jupyterhub.md)")
    up.add_argument("--hub-url", default=None, metavar="URL",
                    help="the hub's URL as browsers reach it (http://HUB), where they sign in to "
                         "the master (default: env JUPYTERHUB_PUBLIC_HUB_URL, else the API URL "
                         "less /hub/api)")
    up.add_argument("--proxy-port", type=int, default=None,
                    help="port of the proxy's own origin, where notebooks and TensorBoards are "
                         "served (/proxy/<task id>/) (default: env DET_PROXY_PORT, else a free "
                         "port picked at start and printed)")
    up.add_argument("-d", "--detach", action="store_true", help="run in the background and return")
    up.add_argument("--open", action="store_true",
                    help="open JupyterLab in a web browser once the master answers")
    up.set_defaults(func=_up)
    down = sub.add_parser("down", help="stop the master started with up")
    down.add_argument("--data-dir", default=_default_data_dir(), help=_DATA_DIR_HELP)
    down.set_defaults(func=_down)
    sm = sub.add_parser("submit", help="create an experiment on the local master and watch it")
    sm.add_argument("config")
    sm.add_argument("context", nargs="?", default=None)
    sm.add_argument("--data-dir", default=_default_data_dir(), help=_DATA_DIR_HELP)
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
