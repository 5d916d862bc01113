"""Notebooks: JupyterLab tasks reached through the master's proxy (``/proxy/{taskId}/…``).

A notebook is an interactive task (a row of ``commands`` with ``task_type`` NOTEBOOK): queued
and placed like a command, never preempted. This service knows what the proxy and the user need
beyond that: where a running notebook listens and whether it answers yet (readiness), who may
reach it (its owner or an admin; anyone else is told it does not exist), the notebook-scoped
tickets browsers use, why a queued one waits, and when an idle one is culled.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from ...errors import DetError, NotFound
from ..access.authz import Perm
from ..access.rbac import RbacService
from ..accounts.auth import User
from ..common.clock import Clock
from ..common.sealed import SealedError
from ._common import TICKET_LIFETIME, Activity, check_ticket, is_active, make_ticket
from .commands import CommandService
from .kinds import KINDS
from .origins import ProxyOrigin

log = logging.getLogger("det_jupyter.notebooks")

#: Seconds between looks at every running notebook's activity (``notebook_idle_check``).
IDLE_CHECK_INTERVAL = 30.0
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


@dataclass
class _Idle:
    """What the culler knows of one task (a moment not seen yet is None, or a time that
    never counts)."""

    last_traffic: float = 0.0  # the proxy's last request to it
    last_active: float | None = None  # when it was last seen or reported active
    looked: float | None = None  # when the master last looked at its Jupyter server
    reported: float = float("-inf")  # when the task last reported (report_idle)
    previous: Activity | None = None  # what the last look saw
    unanswered: bool = False  # its last look got no answer: never culled for it


class NotebookService:
    def __init__(self, commands: CommandService, auth: Any, clock: Clock, secret: str,
                 *, gpu_busy: Callable[[str], bool] | None = None) -> None:
        self._commands = commands
        self._auth = auth
        self._clock = clock
        self._secret = secret
        self._gpu_busy = gpu_busy or (lambda allocation_id: False)
        self._ticket_users: dict[tuple[str, str], tuple[float, User | None]] = {}
        self.ready: set[str] = set()
        # Ready tasks by id: the proxy's fast path (no database read per request).
        self.routes: dict[str, Target] = {}
        self._idle: dict[str, _Idle] = {}  # by task id, until the task is dropped
        # Placed tasks not answering yet, by id (rows of the tick), and those with a probe out.
        self.starting: dict[str, Any] = {}
        self._probing: set[str] = set()
        # Ready tasks with an idle_timeout, by id: what the sweep goes over (rows of the tick).
        self.watched: dict[str, Any] = {}
        self.idle_check_interval = IDLE_CHECK_INTERVAL
        self.rbac: RbacService | None = None  # set by the master: roles gate the proxy too
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
        self._forget(task_id)

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
        self._idle_of(task_id).last_traffic = self._clock.now()

    def _idle_of(self, task_id: str) -> _Idle:
        idle = self._idle.get(task_id)
        if idle is None:
            idle = self._idle[task_id] = _Idle()
        return idle

    # -- background work (called from the master's tick) ------------------------------------

    async def tick(self) -> None:
        """Once a second: one read of the running tasks of every proxied kind; probe the ones
        not ready yet; look at the Jupyter servers whose look is due (each once per
        ``idle_check_interval``, spread by when each became ready); then sweep for idle ones."""
        rows = self._commands.running_proxied()
        running = {r.task_id for r in rows}
        for gone in (set(self.ready) | set(self.routes)) - running:
            self.drop(gone)
        self.starting = {r.task_id: r for r in rows if r.task_id not in self.ready}
        await self.probe_starting()
        now = self._clock.now()
        self.watched = {r.task_id: r for r in rows
                        if r.task_id in self.ready and r.idle_timeout}
        due = [r for r in self.watched.values() if KINDS[r.task_type].jupyter_idle
               and self._look_due(r.task_id, now)]
        if due:
            await asyncio.gather(*(self._look(r, now) for r in due))
        for row, why in self.sweep(self._clock.now()):
            self._cull(row, why)

    def _look_due(self, task_id: str, now: float) -> bool:
        """A look at a Jupyter server is due once per ``idle_check_interval`` (counted from
        its readiness), unless the task itself reported within twice that."""
        idle = self._idle.get(task_id) or _Idle()
        looked = now if idle.looked is None else idle.looked
        return (now - looked >= self.idle_check_interval
                and now - idle.reported >= 2 * self.idle_check_interval)

    async def probe_starting(self) -> None:
        """Probe the placed tasks that do not answer yet (the tick's rows; no read here).
        The master calls this every ``PROBE_INTERVAL`` so a route goes live within that of
        the task answering; a task whose probe is still out is not probed twice."""
        rows = [r for r in self.starting.values() if r.task_id not in self._probing]
        if rows:
            await asyncio.gather(*(self._probe(r) for r in rows))

    def sweep(self, now: float) -> list[tuple[Any, str]]:
        """The watched tasks idle for their ``idle_timeout``, and why: memory only (what the
        looks, the tasks' own reports and the proxy's traffic recorded), no I/O."""
        out = []
        for task_id, row in self.watched.items():
            idle = self._idle.get(task_id) or _Idle()
            if idle.unanswered:
                continue  # not answering: not evidence of idleness
            since = max(now if idle.last_active is None else idle.last_active, idle.last_traffic)
            timeout = row.idle_timeout
            if now - since < timeout:
                continue
            why = (f"notebook_idle_type {row.idle_type or 'kernels_or_terminals'}, "
                   "no proxy traffic" if KINDS[row.task_type].jupyter_idle else "no proxy traffic")
            out.append((row, f"culled: idle for {now - since:.0f} s (idle_timeout {timeout:g} s, {why})"))
        return out

    def report_idle(self, task_id: str, idle: bool) -> None:
        """The task's own report (``PUT /api/v1/notebooks/{id}/report_idle``, sent by a
        notebook's idle checker): not idle counts as activity now. While a task reports, the
        master does not look at its Jupyter server itself."""
        now = self._clock.now()
        state = self._idle_of(task_id)
        state.reported = now
        state.unanswered = False
        if not idle:
            state.last_active = now

    def _forget(self, task_id: str) -> None:
        self.watched.pop(task_id, None)
        self._idle.pop(task_id, None)

    async def _probe(self, row: Any) -> None:
        path = KINDS[row.task_type].probe
        try:
            token = self._commands.upstream_token(row)
        except SealedError as exc:  # the data dir's secrets_key changed under a running task
            self.starting.pop(row.task_id, None)
            self._cull(row, f"unreachable: its proxy token does not open ({exc})")
            return
        self._probing.add(row.task_id)
        try:
            ok = await (_get_json(row, token, path, timeout=2.0) if path is not None
                        else _connects(row.proxy_address, timeout=2.0))
        finally:
            self._probing.discard(row.task_id)
        if ok is not None and ok is not False and row.task_id in self.starting:
            del self.starting[row.task_id]
            self.ready.add(row.task_id)
            self.routes[row.task_id] = Target(row.task_id, row.proxy_address, token, row.owner_id)
            idle = self._idle_of(row.task_id)
            idle.last_active = idle.looked = self._clock.now()
            log.info("notebook %s is ready at %s", row.task_id, row.proxy_address)

    async def _look(self, row: Any, now: float) -> None:
        """One look at a notebook server's kernels, terminals, sessions and status."""
        idle = self._idle_of(row.task_id)
        idle.looked = now
        token = self._commands.upstream_token(row)
        kernels, terminals, sessions, status = await asyncio.gather(
            *(_get_json(row, token, path) for path in
              ("api/kernels", "api/terminals", "api/sessions", "api/status")))
        if kernels is None or status is None:
            idle.unanswered = True
            return
        idle.unanswered = False
        seen = Activity(
            kernels=len(kernels), busy_kernels=sum(k.get("execution_state") == "busy" for k in kernels),
            kernel_connections=sum(int(k.get("connections") or 0) for k in kernels),
            terminals=len(terminals or []), sessions=len(sessions or []),
            last_activity=_epoch(status.get("last_activity")))
        idle_type = row.idle_type or "kernels_or_terminals"
        if is_active(idle_type, seen, idle.previous, self._gpu_busy(row.allocation_id)):
            idle.last_active = now
        idle.previous = seen

    def _cull(self, row: Any, reason: str) -> None:
        log.info("%s %s %s", row.task_type.lower(), row.task_id, reason)
        owner = self._auth.user_by_id(row.owner_id)
        self._commands.kill(owner, row.task_id, row.task_type, reason=reason)
        self.drop(row.task_id)


async def _get_json(row: Any, token: str, path: str, timeout: float = 5.0) -> Any:
    """GET the notebook server's ``/proxy/<id>/<path>`` with its ``token``; None on any
    failure."""
    url = f"http://{row.proxy_address}/proxy/{row.task_id}/{path}"
    try:
        resp = await AsyncHTTPClient().fetch(
            url, headers={"Authorization": f"token {token}"},
            request_timeout=timeout, connect_timeout=timeout)
        return json.loads(resp.body)
    except (HTTPClientError, OSError, ValueError, asyncio.TimeoutError):
        return None


async def _connects(address: str, timeout: float) -> bool:
    """Whether a TCP connection to ``host:port`` opens (a task that speaks no HTTP)."""
    host, _, port = address.rpartition(":")
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), timeout)
    except (OSError, ValueError, asyncio.TimeoutError):
        return False
    writer.close()
    return True


def _epoch(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None

