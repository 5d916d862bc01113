"""Commands: one process on the cluster (``det cmd run``), a job of its own, never preempted.

A command is a task with one allocation. It waits in its pool's queue like a trial, but no
policy preempts it (Determined: notebooks, TensorBoards, shells and commands are not
preemptible), and it runs once: its exit ends it, whatever the code.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shlex
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from det_agent.wire import Container, Mount, TaskSpec

from ... import config as expconf
from ...errors import InvalidRequest, NotFound, Unavailable
from ...store import jobs as job_store
from ...store import reader
from ...store import tasks as store
from ..accounts.auth import User
from ..allocation.cluster_info import build_info_files
from ..allocation.service import AllocationService, Gang
from ..allocation.spec import MasterAddress, gang_env, master_env, task_env
from ..common.clock import Clock
from ..common.identity import MasterIdentity
from ..common.sealed import SealedError, Sealer, is_sealed
from ..common.states import AllocState
from . import generic
from ._common import with_reported_host
from ._preflight import Preflight
from ._probe import hub_prefix_of
from .kinds import KINDS, work_dir_mounts
from .ssh import PRIVATE_KEY

if TYPE_CHECKING:
    from ...config.resources import ResourceConfig
    from ..experiments.trials import TrialService

DEFAULT_PRIORITY = 42
_CLI = {"COMMAND": "cmd", generic.KIND: "task", **{k: v.cli for k, v in KINDS.items()}}


SLOT_TYPES = ("cpu", "cuda", "rocm")  # the device types a container is chosen for
HUB_PREFIX = "hub_prefix"  # a JupyterHub server's URL prefix (/user/<name>/)
HUB_ENV = "hub_env"  # its spawner's variables, sealed


@dataclass(frozen=True)
class HubServer:
    """A hub user's single-user server: where the hub routes it, and the variables its
    spawner gives it (JUPYTERHUB_API_TOKEN, JUPYTERHUB_CLIENT_ID, ...)."""

    prefix: str
    env: Mapping[str, str]

    def __post_init__(self) -> None:
        if not (self.prefix.startswith("/") and self.prefix.endswith("/")) or "//" in self.prefix:
            raise InvalidRequest(f"prefix: {self.prefix!r} is not a URL path prefix; give e.g. /user/alice/")
        bad = [k for k, v in self.env.items() if not isinstance(k, str) or not isinstance(v, str)
               or not k or "=" in k or "\0" in k + v]
        if bad:
            raise InvalidRequest(f"env: {bad[0]!r} is not a variable name with a string value")




@dataclass(frozen=True)
class CommandConfig:
    """What a command runs and on what: validated from ``v1LaunchCommandRequest.config``."""

    entrypoint: str | list[str]
    slots: int
    priority: int | None
    resource_pool: str
    description: str
    env: dict[str, str]
    #: environment.image (and the other container keys): its container on slots of each
    #: device type (cpu, cuda, rocm); None: a process there.
    containers: Mapping[str, Container | None] = dataclasses.field(default_factory=dict)

    @property
    def in_container(self) -> bool:
        return any(c is not None for c in self.containers.values())

    @classmethod
    def parse(cls, raw: Any) -> CommandConfig:
        if not isinstance(raw, dict):
            raise InvalidRequest("config must be an object with an entrypoint")
        entry = raw.get("entrypoint")
        entrypoint: str | list[str]
        if isinstance(entry, list) and entry and all(isinstance(x, str) for x in entry):
            # One word is a shell command line (`det cmd run 'make && ./run'`); more are argv.
            entrypoint = entry[0] if len(entry) == 1 else list(entry)
        elif isinstance(entry, str) and entry.strip():
            entrypoint = entry
        else:
            raise InvalidRequest("config.entrypoint must be a command line or a non-empty list of strings")
        res = raw.get("resources") or {}
        if not isinstance(res, dict):
            raise InvalidRequest("config.resources must be an object (slots, priority, resource_pool)")
        slots = res.get("slots", 1)
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 0:
            raise InvalidRequest(f"config.resources.slots must be an integer >= 0, got {slots!r}")
        priority = res.get("priority")
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)
                                     or not 1 <= priority <= 99):
            raise InvalidRequest(f"config.resources.priority must be an integer from 1 to 99, got {priority!r}")
        pool = res.get("resource_pool") or ""
        if not isinstance(pool, str):
            raise InvalidRequest("config.resources.resource_pool must be a string")
        try:
            env = expconf.environment_variables(raw, "cpu")
        except (TypeError, ValueError, AttributeError) as exc:
            raise InvalidRequest(f"config.environment.environment_variables: {exc}") from None
        line = entrypoint if isinstance(entrypoint, str) else shlex.join(entrypoint)
        desc = raw.get("description") or f"Command ({line[:40]})"
        expconf.validate_container_keys(raw)  # 400 naming the key, as for experiments
        return cls(entrypoint, slots, priority, pool, str(desc), env,
                   {t: expconf.container_for(raw, t) for t in SLOT_TYPES})


class CommandService:
    def __init__(self, engine: sa.Engine, clock: Clock, allocations: AllocationService, identity: MasterIdentity,
                 *, sealer: Sealer | None = None, resources: ResourceConfig | None = None,
                 notebook_root: str = "/tmp/det-notebooks", notebook_timeout_s: float | None = None,
                 kind_defaults: Mapping[str, Any] | None = None, hub_token: str | None = None) -> None:
        """``notebook_root``: a user's notebooks work in <root>/<user>; ``notebook_timeout_s``:
        the master's default idle_timeout of notebooks; ``kind_defaults``: other master
        settings the kinds read (``tensorboard_timeout_s``)."""
        self._engine = engine
        #: (workspace id, its name, workload type, config) -> the config admitted; set by the root.
        self.admit: Callable[[int, str, str, dict[str, Any]], dict[str, Any]] | None = None
        # Seals what tasks' rows hold that must be replayed (services._sealed). The master
        # passes one whose key is kept in the data dir; without one, a key of this process
        # only (what it sealed does not open after a restart).
        self._sealer = sealer or Sealer(os.urandom(32))
        self._reader = reader(engine)
        self._clock = clock
        self._allocs = allocations
        self.identity = identity  # shared: its URL is set once the server bound its port
        self.resources = resources
        self.notebook_root = notebook_root
        self.notebook_timeout_s = notebook_timeout_s
        self.kind_defaults: dict[str, Any] = dict(kind_defaults or {})
        self.preflight = Preflight()  # the app registers its task Python (_preflight)
        self.hub_token = hub_token  # the master's JupyterHub service token, if it serves a hub

    def launch(self, user: User, raw_config: Any, files: list[dict] | None = None,
               kind: str = "COMMAND", workspace_id: int = 1, *, extra: dict[str, Any] | None = None,
               context: bytes | None = None, hub: HubServer | None = None) -> sa.Row:
        """Queue a task of ``kind``: COMMAND, GENERIC (``generic.GenericTasks.create``, which
        passes what the row keeps beyond a command's as ``extra``), or a proxied kind of
        ``_kinds.KINDS``. ``context``: a context archive already packed (else ``files``')."""
        extra = dict(extra or {})
        if isinstance(raw_config, dict) and kind != generic.KIND:  # a typo is refused, as
            expconf.check_task_keys(raw_config, kind)  # 0.38.1's strict decode does
        if kind in KINDS:
            if not isinstance(raw_config, dict):
                raise InvalidRequest("config must be an object")
            raw_config = dict(raw_config)
            raw_config.setdefault("entrypoint", kind.lower())  # replaced when it is placed
            raw_config.setdefault("description", f"{KINDS[kind].cli.capitalize()} ({user.username})")
            try:
                extra = KINDS[kind].settings(raw_config, user.username, {
                    "notebook_root": self.notebook_root, "notebook_timeout_s": self.notebook_timeout_s,
                    **self.kind_defaults})
            except ValueError as exc:
                raise InvalidRequest(str(exc)) from None
        elif kind not in ("COMMAND", generic.KIND):
            raise InvalidRequest(f"unknown task type {kind!r}")
        if self.admit is not None and isinstance(raw_config, dict):  # config policies, pool bindings
            raw_config = self.admit(workspace_id, f"id {workspace_id}", "NTSC", raw_config)
        cfg = CommandConfig.parse(raw_config)  # what the config itself says is checked first
        defaults = None if self.resources is None else \
            self.resources.container_defaults_for(cfg.resource_pool, cfg.slots)
        if defaults:  # the master's task_container_defaults, under what the config says
            cfg = CommandConfig.parse(expconf.apply_container_defaults(raw_config, defaults))
        # A plain UUID, as 0.38.1's model.NewTaskID(): the stock client takes only those (or
        # "<experiment>.<uuid>") as whole ids. Older rows' "nb-<uuid>" ids still resolve: every
        # lookup is by the exact id, and the row's task_type tells the kind.
        task_id = str(uuid.uuid4())
        if PRIVATE_KEY in extra:  # a shell's: its owner fetches it again, so it is sealed
            extra[PRIVATE_KEY] = self._sealer.seal(extra[PRIVATE_KEY], f"{task_id}:{PRIVATE_KEY}")
        if hub is not None:  # a JupyterHub server: the hub's variables reach its task only
            if kind != "NOTEBOOK":
                raise InvalidRequest("only a notebook can be a JupyterHub server")
            extra[HUB_PREFIX] = hub.prefix
            extra[HUB_ENV] = self._sealer.seal(json.dumps(dict(hub.env)), f"{task_id}:{HUB_ENV}")
        try:
            self.resources.check_pool(cfg.resource_pool, "config.resources.resource_pool")
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None
        pool = self.resources.pool_for(cfg.resource_pool, cfg.slots)
        self.preflight.check(kind, pool)  # 400 when the task would lack its package
        priority = cfg.priority or self.resources.pools[pool].scheduler.default_priority
        tgz = context if context is not None else (expconf.context_to_tgz(files or []) if files else None)
        job_id = f"job-{uuid.uuid4()}"
        now = self._clock.now()
        with self._engine.begin() as conn:
            job_store.insert_job(
                conn, job_id=job_id, job_type=kind, owner_id=user.id, priority=priority, weight=1.0,
                max_slots=None, resource_pool=cfg.resource_pool, queue_position=now, submitted_at=now,
            )
            store.insert(
                conn, task_id=task_id, job_id=job_id, owner_id=user.id, description=cfg.description,
                config={"entrypoint": cfg.entrypoint, "resources": {"slots": cfg.slots,
                        "priority": priority, "resource_pool": pool}, "env": cfg.env,
                        "description": cfg.description,
                        "container": {t: None if c is None else c.to_wire() for t, c in cfg.containers.items()},
                        **extra},
                context=tgz, start_time=now, task_type=kind, workspace_id=workspace_id,
            )
            self._allocs.request(conn, task_id=task_id, trial_id=None, slots=cfg.slots,
                                 priority=priority, resource_pool=pool, job_id=job_id,
                                 requires=needs(cfg.in_container))
        self._allocs.schedule_soon()
        return self.get(task_id, kind)

    # -- reads --------------------------------------------------------------------------

    def get(self, task_id: str, kind: str | None = "COMMAND") -> sa.Row:
        """The task ``task_id`` (of ``kind``, when given; another kind is not found)."""
        with self._reader.connect() as conn:
            row = store.get(conn, task_id)
        if row is None or (kind is not None and row.task_type != kind):
            what = (kind or "task").lower()
            raise NotFound(f"{what} {task_id} not found; det {_CLI.get(kind or '', 'cmd')} list "
                           f"shows them")
        return row

    def list(self, user: User | None = None, kind: str | tuple[str, ...] = "COMMAND") -> list[sa.Row]:
        """Tasks of ``kind`` (or of any of several kinds), oldest first; ``user``'s only if
        given."""
        kinds = (kind,) if isinstance(kind, str) else kind
        with self._reader.connect() as conn:
            return store.listing(conn, kinds, None if user is None else user.id)

    def running_proxied(self) -> list[sa.Row]:
        """The running tasks of every proxied kind that have an address: only what the
        proxy's readiness and idle passes read (once a second): no context, no user join, and
        of the config only ``idle_timeout`` and ``idle_type`` (extracted by the database)."""
        with self._reader.connect() as conn:
            return store.running_proxied(conn, tuple(KINDS))

    def report_proxy_address(self, task_id: str, allocation_id: str, reported: str) -> str | None:
        """The task's own report of where it listens (``POST .../proxy_address``; 0.38.1's pods
        send their pod IP): the proxy reaches it there, on the port the master gave it. The
        new address when it changed; None when there is nothing to change (not a proxied
        kind, not placed yet, an ended allocation, or the same address). InvalidRequest
        when ``reported`` is no host."""
        with self._reader.connect() as conn:
            row = store.get(conn, task_id)
        if row is None or not row.proxy_address:
            return None
        try:
            address = with_reported_host(row.proxy_address, reported)
        except ValueError as e:
            raise InvalidRequest(str(e)) from e
        if address == row.proxy_address:
            return None
        with self._engine.begin() as conn:
            written = store.set_proxy_address(conn, task_id, allocation_id, address)
        return address if written else None

    def upstream_token(self, row: Any) -> str:
        """The token the proxy sends to the task of ``row`` (a row with ``task_id`` and
        ``proxy_token``), opened. A JupyterHub server accepts the hub's tokens only: the
        master's service token (its role grants access:servers, docs/jupyterhub.md)."""
        if self.hub_token and hub_prefix_of(row):
            return self.hub_token
        return self._sealer.open(row.proxy_token, f"{row.task_id}:proxy_token")

    def private_key(self, row: Any) -> str:
        """A shell's SSH private key (of ``row``'s config), opened; "" when it has none."""
        sealed = (row.config or {}).get(PRIVATE_KEY) or ""
        try:
            return self._sealer.open(sealed, f"{row.task_id}:{PRIVATE_KEY}") if sealed else ""
        except SealedError as exc:
            raise Unavailable(f"shell {row.task_id}'s key is lost ({exc}); start a new shell") from None

    def seal_plaintext(self) -> int:
        """Seal the upstream tokens and private keys that rows written before sealing hold in
        plain text; returns how many rows changed. On SQLite the old values' bytes are zeroed
        in the file (``secure_delete``); PostgreSQL keeps old row versions until a VACUUM."""
        with self._engine.begin() as conn:
            changes = {}
            for row in store.secrets_of(conn, tuple(KINDS)):
                values: dict[str, Any] = {}
                if row.proxy_token and not is_sealed(row.proxy_token):
                    values["proxy_token"] = self._sealer.seal(row.proxy_token,
                                                              f"{row.task_id}:proxy_token")
                key = (row.config or {}).get(PRIVATE_KEY)
                if key and not is_sealed(key):
                    values["config"] = {**row.config, PRIVATE_KEY: self._sealer.seal(
                        key, f"{row.task_id}:{PRIVATE_KEY}")}
                if values:
                    changes[row.task_id] = values
            if not changes:
                return 0
            store.rewrite_secrets(conn, changes)
        return len(changes)

    def context_tgz(self, task_id: str) -> bytes | None:
        with self._reader.connect() as conn:
            return store.context(conn, task_id)

    # -- control ------------------------------------------------------------------------

    def kill(self, user: User, task_id: str, kind: str = "COMMAND", reason: str | None = None,
             row: Any = None) -> str | None:
        """End the task. Who may is the caller's check (UPDATE_NSC on its workspace; the
        proxied kinds also need their owner or an admin: ``NotebookService.visible``).
        ``row``: the task's row (``get``), where the caller has just read it. Returns its
        allocation's new state where that (and ``reason``) is all that changed in the row
        (``AllocationService.kill``), else None."""
        if row is None:
            row = self.get(task_id, kind)
        if reason:
            with self._engine.begin() as conn:
                store.set_exit_reason(conn, task_id, reason)
        if row.allocation_id and row.alloc_state != AllocState.TERMINATED.value:
            return self._allocs.kill(row.allocation_id)
        return None

    def stop_allocation(self, allocation_id: str) -> str | None:
        """End a task's allocation (a generic task's pause or kill); its exit says the rest."""
        return self._allocs.kill(allocation_id)

    def set_generic_state(self, task_id: str, state: str) -> None:
        with self._engine.begin() as conn:
            store.set_config_key(conn, task_id, generic.STATE, state)

    def resume(self, row: Any) -> None:
        """A paused generic task's next allocation (``<task>.<n+1>``), from its stored config."""
        res = row.config["resources"]
        with self._engine.begin() as conn:
            store.resumed(conn, row.task_id)
            self._allocs.request(conn, task_id=row.task_id, trial_id=None, slots=res["slots"],
                                 priority=row.priority, resource_pool=res["resource_pool"], job_id=row.job_id,
                                 requires=needs(any((row.config.get("container") or {}).values())))
        self._allocs.schedule_soon()

    # -- the AllocationOwner protocol ---------------------------------------------------

    def build_specs(
        self, alloc: sa.Row, gang: Gang, token: str, *, conn: sa.Connection | None = None
    ) -> list[TaskSpec]:
        with (self._reader.connect() if conn is None else nullcontext(conn)) as c:
            cmd, owner = store.with_owner(c, alloc.task_id)
        # A proxied task's upstream token (JupyterLab reads JUPYTER_TOKEN; the proxy sends it),
        # made at placement and stored sealed with its address.
        upstream = secrets.token_hex(24) if cmd.task_type in KINDS else None
        allow_root = os.geteuid() == 0
        sealed = (cmd.config or {}).get(HUB_ENV)
        hub_env = json.loads(self._sealer.open(sealed, f"{cmd.task_id}:{HUB_ENV}")) if sealed else None
        specs = [build_command_spec(cmd, alloc.allocation_id, gang, rank, token, owner, self.identity,
                                    upstream=upstream, allow_root=allow_root, hub_env=hub_env)
                 for rank in range(len(gang.containers))]
        if upstream is not None:  # where the proxy reaches it, and with what, with the placement
            chief = gang.containers[0]
            with (self._engine.begin() if conn is None else nullcontext(conn)) as w:
                store.set_proxy(w, cmd.task_id, f"{chief.address}:{gang.rendezvous_port}",
                                self._sealer.seal(upstream, f"{cmd.task_id}:proxy_token"))
        return specs

    def allocation_exited(
        self, alloc: sa.Row, exit_code: int | None, reason: str | None,
        conn: sa.Connection | None = None,
    ) -> None:
        with (self._engine.begin() if conn is None else nullcontext(conn)) as c:
            row = store.get(c, alloc.task_id)
            if row is not None and row.task_type == generic.KIND:
                if row.allocation_id != alloc.allocation_id:
                    return  # an earlier allocation of a task since unpaused
                state = generic.after_exit(generic.state_of(row.config), exit_code)
                store.set_config_key(c, alloc.task_id, generic.STATE, state.value)
            # A reason set when it was killed (e.g. culled as idle) wins over the exit's.
            store.ended(c, alloc.task_id, exit_code, self._clock.now(), reason)


def build_command_spec(
    cmd: Any, allocation_id: str, gang: Gang, rank: int, token: str, owner: str, ident: MasterAddress,
    *, upstream: str | None, allow_root: bool, hub_env: Mapping[str, str] | None = None,
) -> TaskSpec:
    """The TaskSpec of container ``rank`` of a task's allocation (pure). ``cmd``: its
    ``commands`` row (``task_id``, ``task_type``, ``config``, ``context``); ``upstream``: a
    proxied kind's token (JUPYTER_TOKEN, DET_PROXY_TOKEN); ``allow_root``: the agent runs as
    root (a notebook is then told it may); ``hub_env``: a JupyterHub server's variables from
    its spawner (the kind's own, such as where it listens, win)."""
    c = gang.containers[rank]
    env = {
        **cmd.config.get("env", {}),
        **master_env(ident),
        **task_env(cmd.task_id, allocation_id, rank, token, owner, cmd.task_type),
        **gang_env(gang, rank),
    }
    info = build_info_files(
        master_url=ident.url, cluster_id=ident.cluster_id, agent_id=c.agent_id,
        slot_ids=list(c.slot_ids), task_id=cmd.task_id, allocation_id=allocation_id,
        session_token=token, task_type=cmd.task_type, latest_checkpoint=None, trial=None,
        container_addrs=[x.address for x in gang.containers], container_rank=rank,
        container_slot_counts=[len(x.slot_ids) for x in gang.containers], gpu_uuids=[],
    )
    entrypoint = cmd.config["entrypoint"]
    if hub_env:
        env.update({str(k): str(v) for k, v in hub_env.items()})
    if cmd.task_type in KINDS:
        entrypoint, extra_env = KINDS[cmd.task_type].build(
            cmd.task_id, c.address, gang.rendezvous_port, cmd.config, allow_root)
        env.update(extra_env)
        env["JUPYTER_TOKEN"] = env["DET_PROXY_TOKEN"] = upstream
    return TaskSpec(
        task_id=cmd.task_id, allocation_id=allocation_id, task_type=cmd.task_type,
        entrypoint=entrypoint if isinstance(entrypoint, str) else tuple(entrypoint), env=env,
        slot_ids=tuple(c.slot_ids), info_files=info,
        mounts=tuple(Mount(m["host_path"], m["container_path"], m.get("create"))
                     for m in work_dir_mounts(cmd.config)),
        context_url=None if cmd.context is None else f"/api/v1/tasks/{cmd.task_id}/context_directory",
        container=_container_on(cmd.config.get("container"), c.slot_type),
    )


def _container_on(stored: Any, slot_type: str) -> Container | None:
    """The task's container on slots of ``slot_type`` (its stored per-device wire forms)."""
    wire = stored.get(slot_type) if isinstance(stored, dict) else None
    return Container.from_wire(wire) if wire else None


def needs(container: bool) -> frozenset[str]:
    """The agent features a task's allocation requires: Docker for one with a container."""
    return frozenset({"docker"}) if container else frozenset()


class OwnerRouter:
    """The AllocationOwner the allocation service talks to: trials for allocations of a trial,
    commands for the rest."""

    def __init__(self, trials: TrialService, commands: CommandService) -> None:
        self._trials = trials
        self._commands = commands

    def ended_by_restart(self, alloc: sa.Row) -> None:
        """An allocation that was running when the last master process ended: a trial's
        resumes (its logs say so), a command's ends."""
        if alloc.trial_id is None:
            self._commands.allocation_exited(alloc, None, "the master restarted while it ran")
        else:
            self._trials.ended_by_restart(alloc)

    def build_specs_many(
        self, runs: Sequence[tuple[Any, Gang, str]], conn: sa.Connection
    ) -> dict[str, list[TaskSpec]]:
        """A pass's placements: the trials' together (batched), the others one by one."""
        out = self._trials.build_specs_many([r for r in runs if r[0].trial_id is not None], conn)
        for alloc, gang, token in runs:
            if alloc.trial_id is None:
                out[alloc.allocation_id] = self._commands.build_specs(alloc, gang, token, conn=conn)
        return out

    def allocations_exited(
        self, ended: Sequence[tuple[Any, int | None, str | None]], conn: sa.Connection
    ) -> list[Callable[[], None] | None]:
        """A turn's exits: the trials' together (batched), the others one by one; in order."""
        trials = iter(self._trials.allocations_exited([e for e in ended if e[0].trial_id is not None], conn))
        return [next(trials) if alloc.trial_id is not None
                else self._commands.allocation_exited(alloc, exit_code, reason, conn)
                for alloc, exit_code, reason in ended]
