"""The det-jupyter master as a jupyter-server extension."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import getpass
import logging
import os
import re
import socket
import sys
from typing import Any
from urllib.parse import urlsplit

from jupyter_core.paths import jupyter_data_dir
from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, Dict, Float, Integer, List, Unicode, default

from .composition_root import Master, MasterSettings, load_or_create_secret
from .config.resources import ResourceConfig, load_master_config, parse_resources
from .errors import DetError
from .identity import IDENTITY_ENV, Identity, identity_path, write_identity
from .private_files import open_private, private_dir
from .server_ext.access_log import without_unseen_successes
from .server_ext.jupyter_guard import Guard, OriginPolicy, install, modest_body_limits
from .server_ext.routes import ROUTES
from .services.accounts.hub import HubOAuth
from .services.accounts.users import POLICY_TEXT, password_problem
from .services.interactive.notebooks import PROBE_INTERVAL
from .store import sqlite_url

#: A credential in a URL's query (Jupyter's ``?token=``, the proxy's ``ticket=``, the shell
#: tunnel's ``det_ticket=``).
_URL_SECRET = re.compile(r"((?:token|ticket)=)[^&\s'\"]+")


class _RedactUrlSecrets(logging.Filter):
    """Jupyter logs its URLs with ``?token=…`` at start (``display_url``): the log (``master.log``
    of a detached start, a journal) is no place for a credential, so its value is replaced."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "=" in message and _URL_SECRET.search(message):
            record.msg, record.args = _URL_SECRET.sub(r"\1[redacted]", message), None
        return True


def _environ_secrets() -> tuple[str | None, str | None, str | None]:
    """``DET_ADMIN_PASSWORD``, ``DET_AGENT_TOKEN`` and ``DET_DB_URL``, read, and the secrets
    among them dropped from this process's environment: kernels, tasks and the warm launcher
    started from now on do not inherit them. (Linux still shows the environment this process
    was started with in ``/proc/<pid>/environ``, to its own user and root; prefer the files.)"""
    password = os.environ.pop("DET_ADMIN_PASSWORD", "") or None
    token = os.environ.pop("DET_AGENT_TOKEN", "") or None
    db_url = os.environ.get("DET_DB_URL") or None
    if db_url is not None and urlsplit(db_url).password:
        del os.environ["DET_DB_URL"]
    return password, token, db_url


class DetJupyterApp(ExtensionApp):
    """Serves Determined 0.38.1's REST API, schedules tasks and runs an embedded agent."""

    name = "det_jupyter"
    load_other_extensions = True

    data_dir = Unicode(
        config=True,
        help="Directory for the SQLite database, checkpoints, task work dirs and secrets.",
    )
    db_url = Unicode(
        "",
        config=True,
        help="SQLAlchemy URL of the database (postgresql://user@host/db). Empty: env DET_DB_URL, "
        "else SQLite at <data_dir>/det.db.",
    )
    agent_token = Unicode(
        "",
        config=True,
        help="Shared secret agents present to connect. Empty: env DET_AGENT_TOKEN, else generated "
        "into <data_dir>/agent_token (mode 0600).",
    )
    embedded_agent = Bool(True, config=True, help="Run an agent inside the master process.")
    warm_start = Bool(
        True, config=True,
        help="The embedded agent forks Python tasks from a launcher with the harness loaded.",
    )
    agent_resource_pool = Unicode(
        "", config=True,
        help="Resource pool the embedded agent joins (empty: the default compute pool).",
    )
    agent_runtime = Unicode(
        "auto", config=True,
        help="How the embedded agent runs tasks: auto (a task whose config names an image runs in "
             "a Docker container when a Docker engine answers, the rest as processes), docker "
             "(refuse to start without an engine) or process (never containers).",
    )
    task_python = Unicode(
        "", config=True,
        help="The Python environment the embedded agent's tasks run (python3 resolves there): a "
             "virtual environment, e.g. one with determined==0.38.1 for stock configs (default: "
             "the master's own).",
    )
    agent_slots = Integer(
        None, allow_none=True, config=True,
        help="CPU slots of the embedded agent when there is no GPU (default: number of CPUs).",
    )
    master_url = Unicode(
        "", config=True,
        help="URL tasks and agents use to reach this master (default: http://127.0.0.1:<port><base_url>).",
    )
    preemption_timeout = Float(
        3600.0, config=True,
        help="Seconds a task may take to checkpoint and exit after a preemption signal before it is killed.",
    )
    agent_reconnect_wait = Float(
        25.0, config=True,
        help="Seconds an agent may stay disconnected before its tasks are considered lost.",
    )
    hub_api_url = Unicode(
        "", config=True,
        help="JupyterHub's API URL (http://HUB/hub/api): tokens the hub issued are accepted, their "
        "users being det users of the same name. The hub service token comes from "
        "JUPYTERHUB_API_TOKEN. Empty: no hub.",
    )
    hub_url = Unicode(
        "", config=True,
        help="JupyterHub's URL as browsers reach it (http://HUB), for signing in through the hub. "
        "Empty: env JUPYTERHUB_PUBLIC_HUB_URL, else the API URL less /hub/api.",
    )
    hub_client_id = Unicode(
        "", config=True,
        help="The master's OAuth client id at the hub (its service's, service-<name>). Empty: env "
        "JUPYTERHUB_CLIENT_ID, else service-det-master.",
    )
    master_config = Unicode(
        "", config=True,
        help="Path of a Determined-style master.yaml; its resource_manager and resource_pools "
        "sections set the pools and their schedulers. Empty: env DET_MASTER_CONFIG, else the "
        "resource_manager and resource_pools traits.",
    )
    resource_manager = Dict(
        {}, config=True,
        help="Determined's resource_manager section (default_compute_resource_pool, "
        "default_aux_resource_pool, scheduler: {type, fitting_policy, preemption, default_priority}).",
    )
    resource_pools = List(
        [], config=True,
        help="Determined's resource_pools section: [{pool_name, description, scheduler, "
        "task_container_defaults}]. Empty: one pool named default.",
    )
    task_container_defaults = Dict(
        {}, config=True,
        help="Determined's task_container_defaults: what a task's container gets when its config "
        "does not say (image, environment_variables, bind_mounts, devices, shm_size_bytes, "
        "capabilities, force_pull_image, registry_auth). A pool's own replaces it.",
    )

    notebook_dir = Unicode(
        "", config=True,
        help="Directory under which each user's notebooks work (<dir>/<user>, kept across "
        "notebooks, culling and restarts). Empty: <data_dir>/notebooks. Agents on other hosts "
        "need it at the same path (a shared file system), or a notebook config's work_dir.",
    )
    notebook_timeout = Float(
        0.0, config=True,
        help="Seconds a notebook may stay idle before it is culled, unless its config sets "
        "idle_timeout. 0: never.",
    )
    tensorboard_timeout = Float(
        300.0, config=True,
        help="Seconds a TensorBoard may go without proxy traffic before it is culled, unless its "
        "config sets idle_timeout (Determined's tensorboard_timeout).",
    )
    notebook_idle_check = Float(
        30.0, config=True,
        help="Seconds between looks at each running notebook's kernels, terminals and activity "
        "(default: env DET_NOTEBOOK_IDLE_CHECK, else 30).",
    )

    kernel_identity = Bool(
        True, config=True,
        help="Give the server's kernels this master's URL and a session token of kernel_user "
        "(a 0600 file under the Jupyter runtime dir, named by DET_JUPYTER_IDENTITY), so "
        "notebooks, %det and the widgets need no second login.",
    )
    kernel_user = Unicode(
        "", config=True,
        help="det user the server's kernels act as (created if missing, not an admin). Empty: "
        "the name of the OS user running the server. `det-jupyter up` sets admin.",
    )

    default_user_role = Unicode(
        "Editor", config=True,
        help="Role a new user gets on the Uncategorized workspace (ModelRegistryViewer, Viewer, "
        "EditorRestricted, Editor, WorkspaceAdmin; empty: none). Admins get ClusterAdmin.",
    )
    strict_authz = Bool(
        False, config=True,
        help="Refuse (500) any success from a route that never checked authorization, instead "
        "of only logging it (default: env DET_JUPYTER_STRICT_AUTHZ; the tests set it).",
    )

    proxy_port = Integer(
        0, config=True,
        help="TCP port of the proxy's own origin, where notebooks and TensorBoards are served "
        "(/proxy/<task id>/) apart from the master's origin, so their pages' script cannot call "
        "the master's API. Bound to the server's ip; 0: a free port picked at start. Default: "
        "env DET_PROXY_PORT, else 0.",
    )

    @default("proxy_port")
    def _default_proxy_port(self) -> int:
        value = os.environ.get("DET_PROXY_PORT", "").strip()
        if value and not value.isdigit():
            raise SystemExit(f"det-jupyter: DET_PROXY_PORT={value!r}: a port number (0: any free port)")
        return int(value or 0)

    @default("strict_authz")
    def _default_strict_authz(self) -> bool:
        return os.environ.get("DET_JUPYTER_STRICT_AUTHZ", "") in ("1", "true", "yes")

    @default("notebook_idle_check")
    def _default_idle_check(self) -> float:
        return float(os.environ.get("DET_NOTEBOOK_IDLE_CHECK") or 30.0)

    @default("data_dir")
    def _default_data_dir(self) -> str:
        return os.environ.get("DET_DATA_DIR") or os.path.join(jupyter_data_dir(), "det-jupyter")

    def initialize_settings(self) -> None:
        self._redact_url_secrets()
        password, env_token, env_db_url = _environ_secrets()
        if password is not None and (problem := password_problem(password)) is not None:
            raise SystemExit(f"det-jupyter: DET_ADMIN_PASSWORD must have {problem} (the password "
                             f"policy: {POLICY_TEXT}); choose another, or unset it to have one "
                             "generated")
        private_dir(self.data_dir)
        modest_body_limits(self.serverapp)  # before the server builds its HTTP server from them
        token = self.agent_token or env_token or load_or_create_secret(
            os.path.join(self.data_dir, "agent_token")
        )
        db_url = self.db_url or env_db_url or sqlite_url(os.path.join(self.data_dir, "det.db"))
        self.master = Master(MasterSettings(
            data_dir=self.data_dir,
            db_url=db_url,
            url=self.master_url or "http://127.0.0.1:0",
            agent_token=token,
            initial_password=password,
            preemption_timeout_s=self.preemption_timeout,
            agent_reconnect_wait_s=self.agent_reconnect_wait,
            resources=self._resources(),
            notebook_dir=self.notebook_dir or None,
            notebook_timeout_s=self.notebook_timeout or None,
            notebook_idle_check_s=self.notebook_idle_check,
            tensorboard_timeout_s=self.tensorboard_timeout or None,
            default_user_role=self.default_user_role,
            hub_api_url=self._hub_api_url(),
            hub_service_token=os.environ.get("JUPYTERHUB_API_TOKEN") or None,
            hub_oauth=self._hub_oauth(),
        ))
        if self.master.generated_password and password is None:
            self._keep_generated_password(self.master.generated_password)
        self.settings.update({"det_master": self.master, "det_agent_token": token,
                              "det_strict_authz": self.strict_authz})
        self._agent: Any = None
        self._agent_task: Any = None
        self._tick: Any = None
        self._identity: tuple[str, str] | None = None  # (file, token)
        self._proxy_server = self._bind_proxy()

    def _keep_generated_password(self, generated: str) -> None:
        """The generated password goes to ``<data_dir>/admin_password`` (0600) and, on a
        foreground start, to the terminal once; never to the log, which says where it is."""
        path = os.path.join(self.data_dir, "admin_password")
        with os.fdopen(open_private(path, os.O_WRONLY | os.O_TRUNC), "w") as fh:
            fh.write(generated + "\n")
        self.log.warning("det-jupyter: created users admin and determined; their password is in "
                         "%s (mode 0600). Set DET_ADMIN_PASSWORD before the first start to "
                         "choose it.", path)
        if sys.stderr.isatty():
            print(f"det-jupyter: the password of users admin and determined is {generated} "
                  "(shown once)", file=sys.stderr, flush=True)

    def _redact_url_secrets(self) -> None:
        """Redact credentials in URLs from everything the server logs: on its own logger (its
        start-up URLs) and on its handlers, which the loggers propagating to it (tornado's,
        this extension's) write through."""
        redact = _RedactUrlSecrets()
        log = self.serverapp.log
        for target in (log, *getattr(log, "handlers", ())):
            target.addFilter(redact)

    def _hub_api_url(self) -> str | None:
        """The hub's API: the trait, else DET_HUB_API_URL, else (run as a hub-managed service,
        JUPYTERHUB_SERVICE_NAME set) the JUPYTERHUB_API_URL the hub gives its services."""
        env = os.environ
        service = env.get("JUPYTERHUB_API_URL") if env.get("JUPYTERHUB_SERVICE_NAME") else None
        return self.hub_api_url or env.get("DET_HUB_API_URL") or service or None

    def _hub_oauth(self) -> HubOAuth | None:
        api = self._hub_api_url()
        if not api:
            return None
        env = os.environ
        public = self.hub_url or env.get("JUPYTERHUB_PUBLIC_HUB_URL") or api.rstrip("/").removesuffix("/hub/api")
        return HubOAuth(self.hub_client_id or env.get("JUPYTERHUB_CLIENT_ID") or "service-det-master",
                        public.rstrip("/").removesuffix("/hub"), env.get("JUPYTERHUB_OAUTH_CALLBACK_URL", ""))

    def _resources(self) -> ResourceConfig:
        """Pools and schedulers from the master config file, else from the traits; a bad
        setting stops the server with a message naming it."""
        path = self.master_config or os.environ.get("DET_MASTER_CONFIG", "")
        try:
            if path:
                with open(path) as fh:
                    return load_master_config(fh.read())
            return parse_resources(self.resource_manager, self.resource_pools or None,
                                   self.task_container_defaults or None)
        except (OSError, ValueError) as exc:
            where = f"master config {path}" if path else \
                "DetJupyterApp.resource_manager/resource_pools/task_container_defaults"
            raise SystemExit(f"det-jupyter: {where}: {exc}") from None

    def _bind_proxy(self) -> Any:
        """Listen on the proxy's port now, so a taken port stops the server with a message
        (as Jupyter's own does); it serves once the event loop runs."""
        from .server_ext.proxy_server import ProxyServer

        port = self.proxy_port
        if not 0 <= port <= 65535:
            raise SystemExit(f"det-jupyter: DetJupyterApp.proxy_port={port}: a port number 0-65535")
        server = ProxyServer(self.serverapp.ip, port, getattr(self.serverapp, "ssl_options", None))
        try:
            self.master.notebooks.proxy_origin = server.bind()
        except OSError as exc:
            raise SystemExit(f"det-jupyter: the proxy cannot listen on {self.serverapp.ip or '*'}:"
                             f"{port} ({exc.strerror or exc}); set DetJupyterApp.proxy_port (env "
                             f"DET_PROXY_PORT) to a free port, or 0 for any") from None
        return server

    def _start_proxy(self) -> None:
        from .server_ext.proxy_server import proxy_application

        web_app = self.serverapp.web_app
        # Tickets in query strings are credentials: never in the master's access log either.
        scrub = list(web_app.settings.get("extra_log_scrub_param_keys") or [])
        web_app.settings["extra_log_scrub_param_keys"] = [*scrub, "ticket"]
        self._proxy_server.start(proxy_application(web_app.settings),
                                 xheaders=self.serverapp.trust_xheaders,
                                 max_body_size=self.serverapp.max_body_size,
                                 max_buffer_size=self.serverapp.max_buffer_size)
        origin = self.master.notebooks.proxy_origin
        self.log.info("det-jupyter: notebooks and TensorBoards are served at %s/proxy/<task id>/",
                      origin.url() if origin is not None else "?")

    def initialize_handlers(self) -> None:
        self.handlers.extend(ROUTES)
        self._guard_jupyter_routes()

    def _guard_jupyter_routes(self) -> None:
        """Jupyter's own routes (every handler built on its ``JupyterHandler``) get a strict
        origin check and on-site redirects (``server_ext.jupyter_guard``); det's own routes
        keep their own policy."""
        from jupyter_server.base.handlers import JupyterHandler

        serverapp = self.serverapp
        try:
            policy = OriginPolicy(serverapp.allow_origin, serverapp.allow_origin_pat)
        except ValueError as exc:
            raise SystemExit(f"det-jupyter: ServerApp.{exc}") from None
        det_routes = [pattern for pattern, handler, *_ in ROUTES if not issubclass(handler, JupyterHandler)]
        install(serverapp.web_app, Guard(policy, det_routes, serverapp.base_url), serverapp.base_url)

    def _own_url(self) -> str:
        if self.master_url:
            return self.master_url.rstrip("/")
        k8s = self.master.resources.kubernetes  # how pods reach the master
        if k8s is not None and k8s.master_url():
            return str(k8s.master_url()).rstrip("/")
        base = self.serverapp.base_url.rstrip("/")
        return f"http://127.0.0.1:{self.serverapp.port}{base}"

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        self.master.set_url(self._own_url())
        # det master logs: the extension's and the server's log lines, and the services' own
        # (det_jupyter.*, at INFO: without a handler of their own they print nothing more).
        if logging.getLogger("det_jupyter").level == logging.NOTSET:
            logging.getLogger("det_jupyter").setLevel(logging.INFO)
        self.master.master_logs.attach(self.log.name, serverapp.log.name)
        self.master.start()
        settings = self.serverapp.web_app.settings
        settings["log_function"] = without_unseen_successes(settings.get("log_function"))
        self._start_proxy()
        self._export_identity()
        # Validations reported in one loop turn share a transaction (group commit).
        self.master.searcher_batch.schedule = asyncio.get_running_loop().call_soon
        from tornado.ioloop import PeriodicCallback

        # Events drive scheduling; this tick is a safety net so nothing waits on a lost event.
        self._tick = PeriodicCallback(self.master.rm.schedule_soon, 2000)
        self._tick.start()
        begin = getattr(self.master.rm, "begin", None)  # a Kubernetes cluster's nodes and pods
        if begin is not None:
            begin()
        # Notebooks: readiness (every second) and idle culling (every notebook_idle_check).
        self._notebook_tick = PeriodicCallback(self._notebooks_tick, 1000)
        self._notebook_tick.start()
        # Placed notebooks that do not answer yet are probed more often: a route goes live
        # within PROBE_INTERVAL of the server answering (no read of the database here).
        self._probe_tick = PeriodicCallback(self.master.notebooks.probe_starting,
                                            PROBE_INTERVAL * 1000)
        self._probe_tick.start()
        if self.embedded_agent and self.master.resources.kubernetes is None:
            from det_agent import Agent, detect_slots

            agent_id = f"{socket.gethostname()}-embedded"
            python = sys.executable
            if self.task_python:
                from det_agent.runtime import task_python_dir
                try:
                    python = os.path.join(task_python_dir(self.task_python), "python3")
                except ValueError as exc:
                    raise SystemExit(f"det-jupyter: {exc}") from None
            # What its notebooks and TensorBoards need is checked before they are queued.
            commands = self.master.commands
            pool = self.agent_resource_pool or (
                commands.resources.default_compute_pool if commands.resources else "")
            commands.preflight.register(pool, python)
            self._agent = Agent(
                self.master.settings.url,
                self.master.settings.agent_token,
                address="127.0.0.1",
                resource_pool=self.agent_resource_pool,
                agent_id=agent_id,
                slots=detect_slots(self.agent_slots),
                work_dir=os.path.join(self.data_dir, "agent"),
                warm_start=self.warm_start,
                connect=lambda: self._local_link(agent_id),
                hidden_paths=[self.data_dir, self.serverapp.runtime_dir],
                task_python=self.task_python or None,
                runtime_mode=self.agent_runtime,
            )
            self._agent_task = asyncio.ensure_future(self._agent.run())
        self.log.info("det-jupyter master at %s (cluster %s)", self.master.settings.url, self.master.cluster_id)
        # What start-up built lives as long as the server: kept out of the collector's full
        # passes, which otherwise walk all of it (60-140 ms each on a small machine, a stall of
        # every request and of the scheduler) and now walk only what came after.
        gc.collect()
        gc.freeze()

    async def _notebooks_tick(self) -> None:
        try:
            await self.master.notebooks.tick()
        except Exception:  # a bad pass must not stop the next one
            self.log.exception("det-jupyter: notebook readiness/idle pass failed")

    def _export_identity(self) -> None:
        """Write this server's identity for its kernels (see ``det_jupyter.identity``); the
        kernels inherit ``DET_JUPYTER_IDENTITY`` from this process's environment."""
        if not self.kernel_identity:
            return
        try:
            name = self.kernel_user or getpass.getuser()
            self.master.auth.ensure_user(name)
            token = self.master.auth.session_for(name)
            path = write_identity(identity_path(self.serverapp.runtime_dir),
                                  Identity(self.master.settings.url, name, token))
        except (DetError, OSError, KeyError) as exc:  # getuser(): KeyError with no passwd entry
            self.log.warning("det-jupyter: kernels get no identity (%s); they log in as usual", exc)
            return
        os.environ[IDENTITY_ENV] = str(path)
        self._identity = (str(path), token)
        # The sidebar's POST /det-jupyter/session gives a browser user the same identity.
        self.serverapp.web_app.settings["det_kernel_user"] = name
        self.log.info("det-jupyter: kernels act as det user %r (%s)", name, path)

    def _drop_identity(self) -> None:
        if self._identity is None:
            return
        path, token = self._identity
        self._identity = None
        self.serverapp.web_app.settings.pop("det_kernel_user", None)
        if os.environ.get(IDENTITY_ENV) == path:
            del os.environ[IDENTITY_ENV]
        with contextlib.suppress(OSError):
            os.unlink(path)
        with contextlib.suppress(Exception):  # the database may be gone already
            self.master.auth.logout(token)

    def _local_link(self, agent_id: str) -> Any:
        """The embedded agent's connection: frames go between it and its session directly,
        without a websocket, in this process's event loop."""
        from det_agent import LocalLink

        from .server_ext.cluster import AgentSession

        session: AgentSession | None = None

        def deliver(text: str) -> None:
            assert session is not None
            session.on_message(text)

        def closed() -> None:
            if session is not None:
                session.on_close()

        link = LocalLink(deliver, closed)
        session = AgentSession(self.master, agent_id, link.push)
        return link

    async def stop_extension(self) -> None:
        self._drop_identity()
        if self._tick is not None:
            self._tick.stop()
            self._notebook_tick.stop()
            self._probe_tick.stop()
        if self._agent is not None:
            await self._agent.stop()
        if self._agent_task is not None:
            self._agent_task.cancel()
        end = getattr(self.master.rm, "end", None)
        if end is not None:
            end()
        self.master.notebooks.proxy_origin = None
        await self._proxy_server.stop()
        self.master.stop()
