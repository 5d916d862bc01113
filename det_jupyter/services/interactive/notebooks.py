"""Notebooks: JupyterLab tasks reached through the master's proxy (``/proxy/{taskId}/…``).

A notebook is an interactive task (a row of ``commands`` with ``task_type`` NOTEBOOK): queued
and placed like a command, never preempted. This service knows what the proxy and the user need
beyond that: where a running notebook listens and whether it answers yet (readiness), who may
reach it (its owner or an admin; anyone else is told it does not exist), the notebook-scoped
tickets browsers use, why a queued one waits, and when an idle one is culled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...errors import DetError, NotFound
from ..access.authz import Perm
from ..access.rbac import RbacService
from ..accounts.auth import AuthService, User
from ..common.clock import Clock
from ..common.sealed import SealedError
from ._common import TICKET_LIFETIME, check_ticket, make_ticket
from ._probe import connects, get_json, hub_prefix_of
from .commands import CommandService
from .culler import IDLE_CHECK_INTERVAL, IdleCuller
from .kinds import KINDS
from .origins import ProxyOrigin

log = logging.getLogger("det_jupyter.notebooks")

#: Seconds between probes of a placed task that does not answer yet: its route goes live
#: within this of its server answering.
PROBE_INTERVAL = 0.1
#: Seconds a ticket's user is trusted from memory (as session tokens are).
TICKET_USER_CACHE_S = 1.0


@dataclass(frozen=True)
class Target:
    """Where the proxy sends a notebook's requests, and with which upstream token."""

    task_id: str
    address: str  # host:port
    token: str
    owner_id: int


class NotebookService:
    def __init__(self, commands: CommandService, auth: AuthService, clock: Clock, secret: str,
                 *, gpu_busy: Callable[[str], bool] | None = None, rbac: RbacService | None = None,
                 idle_check_interval: float = IDLE_CHECK_INTERVAL) -> None:
        """``rbac``: roles gate the proxy too; ``gpu_busy`` and ``idle_check_interval``: the
        culler's (``culler.IdleCuller``)."""
        self._commands = commands
        self._auth = auth
        self._clock = clock
        self._secret = secret
        self._ticket_users: dict[tuple[str, str], tuple[float, User | None]] = {}
        self.ready: set[str] = set()
        # Ready tasks by id: the proxy's fast path (no database read per request).
        self.routes: dict[str, Target] = {}
        # Placed tasks not answering yet, by id (rows of the tick), and those with a probe out.
        self.starting: dict[str, Any] = {}
        self._probing: set[str] = set()
        self.rbac = rbac
        self.culler = IdleCuller(clock, cull=self._cull, upstream_token=commands.upstream_token,
                                 gpu_busy=gpu_busy, interval_s=idle_check_interval)
        # Set by the app once the proxy listens on its own origin (None: not serving).
        self.proxy_origin: ProxyOrigin | None = None

    # -- who may reach what ---------------------------------------------------------------

    def visible(self, user: User, task_id: str, kind: str | None = "NOTEBOOK") -> Any:
        """The task's row (of ``kind``; None: any proxied kind), if ``user`` may see it (its
        owner or an admin); NotFound for everyone else, as for a task that does not exist."""
        row = self._commands.get(task_id, kind)
        if row.task_type not in KINDS or (not user.admin and row.owner_id != user.id) or (
                self.rbac is not None and not self.rbac.grants(user).can(Perm.UPDATE_NSC, row.workspace_id)):
            what = KINDS[kind].cli if kind in KINDS else "task"
            raise NotFound(f"{what} {task_id} not found; det {what} list shows them")
        return row

    def ticket(self, user: User, task_id: str, kind: str | None = "NOTEBOOK") -> str:
        """A browser credential good for this task only, for a week."""
        self.visible(user, task_id, kind)
        return make_ticket(self._secret, task_id, user.id, self._clock.now() + TICKET_LIFETIME)

    def user_for_ticket(self, task_id: str, ticket: str) -> User | None:
        """The active user a ticket vouches for on ``task_id``. The user is read at most once a
        second per ticket (a browser sends the ticket's cookie with every request), so a
        deactivated user is shut out within a second."""
        now = time.monotonic()
        cached = self._ticket_users.get((task_id, ticket))
        if cached is not None and now - cached[0] < TICKET_USER_CACHE_S:
            return cached[1]
        user_id = check_ticket(self._secret, task_id, ticket, self._clock.now())
        user = None
        if user_id is not None:
            try:
                found = self._auth.user_by_id(user_id)
            except DetError:
                found = None
            user = found if found is not None and found.active else None
        if len(self._ticket_users) > 10_000:
            self._ticket_users.clear()
        self._ticket_users[(task_id, ticket)] = (now, user)
        return user

    def route(self, user: User, task_id: str) -> Target | None:
        """The ready task's target from memory, if ``user`` may reach it; None when it is not
        ready (the caller then reads the database for a 404 or a waiting page)."""
        target = self.routes.get(task_id)
        if target is None:
            return None
        if not user.admin and target.owner_id != user.id:
            raise NotFound(f"task {task_id} not found")
        return target

    def drop(self, task_id: str) -> None:
        """The task is ending: stop routing to it now, not at the next tick."""
        self.ready.discard(task_id)
        self.starting.pop(task_id, None)
        self.routes.pop(task_id, None)
        self.culler.forget(task_id)

    def target_of(self, row: Any) -> Target | None:
        """Where to proxy requests to a task the caller may reach (``row``: what
        :meth:`visible` gave it); None while it is not running or not answering yet."""
        route = self.routes.get(row.task_id)
        if route is not None:
            return route
        if row.alloc_state != "RUNNING" or not row.proxy_address or row.task_id not in self.ready:
            return None
        return Target(row.task_id, row.proxy_address, self._commands.upstream_token(row),
                      row.owner_id)

    def waiting(self, row: Any, queue_reason: Callable[[str], str | None]) -> str:
        """A sentence for the waiting page: why the notebook is not reachable yet."""
        state = row.alloc_state
        what = KINDS[row.task_type].cli if row.task_type in KINDS else "task"
        if row.end_time is not None or state in (None, "TERMINATED"):
            return f"This {what} has ended: {row.exit_reason or 'it exited'}."
        if state == "PENDING":
            reason = queue_reason(row.job_id)
            return f"Queued: {reason}." if reason else "Queued: waiting for a free slot."
        if state == "TERMINATING":
            return f"This {what} is stopping."
        return {"notebook": "Starting JupyterLab…", "tensorboard": "Starting TensorBoard…"}.get(
            what, f"Starting the {what}…")

    def touched(self, task_id: str) -> None:
        """Traffic through the proxy: a notebook in use is not idle."""
        self.culler.touched(task_id)

    def report_idle(self, task_id: str, idle: bool) -> None:
        """The task's own report of whether it is idle (``culler.IdleCuller.report_idle``)."""
        self.culler.report_idle(task_id, idle)

    # -- background work (called from the master's tick) ------------------------------------

    async def tick(self) -> None:
        """Once a second: one read of the running tasks of every proxied kind; probe the ones
        not ready yet; look at the Jupyter servers whose look is due (each once per
        ``idle_check_interval``, spread by when each became ready); then cull idle ones."""
        rows = self._commands.running_proxied()
        running = {r.task_id for r in rows}
        for gone in (set(self.ready) | set(self.routes)) - running:
            self.drop(gone)
        self.starting = {r.task_id: r for r in rows if r.task_id not in self.ready}
        await self.probe_starting()
        await self.culler.tick(r for r in rows if r.task_id in self.ready)

    async def probe_starting(self) -> None:
        """Probe the placed tasks that do not answer yet (the tick's rows; no read here).
        The master calls this every ``PROBE_INTERVAL`` so a route goes live within that of
        the task answering; a task whose probe is still out is not probed twice."""
        rows = [r for r in self.starting.values() if r.task_id not in self._probing]
        if rows:
            await asyncio.gather(*(self._probe(r) for r in rows))

    async def _probe(self, row: Any) -> None:
        path = KINDS[row.task_type].probe
        if hub_prefix_of(row):
            path = None  # a JupyterHub server answers the hub's tokens only: its port opening will do
        try:
            token = self._commands.upstream_token(row)
        except SealedError as exc:  # the data dir's secrets_key changed under a running task
            self.starting.pop(row.task_id, None)
            self._cull(row, f"unreachable: its proxy token does not open ({exc})")
            return
        self._probing.add(row.task_id)
        try:
            ok = await (get_json(row, token, path, timeout=2.0) if path is not None
                        else connects(row.proxy_address, timeout=2.0))
        finally:
            self._probing.discard(row.task_id)
        if ok is not None and ok is not False and row.task_id in self.starting:
            del self.starting[row.task_id]
            self.ready.add(row.task_id)
            self.routes[row.task_id] = Target(row.task_id, row.proxy_address, token, row.owner_id)
            self.culler.became_ready(row.task_id)
            log.info("notebook %s is ready at %s", row.task_id, row.proxy_address)

    def _cull(self, row: Any, reason: str) -> None:
        log.info("%s %s %s", row.task_type.lower(), row.task_id, reason)
        owner = self._auth.user_by_id(row.owner_id)
        self._commands.kill(owner, row.task_id, row.task_type, reason=reason)
        self.drop(row.task_id)


