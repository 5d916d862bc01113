"""Allocations: one run of a task on an agent's slots — tokens, preemption, exit.

An allocation is PENDING until the scheduler places it, ASSIGNED once sent to an agent,
RUNNING once the agent started it, TERMINATED when its processes are gone. Its token is valid
only while it is not TERMINATED. Preemption is cooperative: the task long-polls
``signals/preemption``, acks, and exits 0; one that does not is killed after its timeout.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import sqlalchemy as sa

from det_agent.wire import TaskSpec

from ... import scheduler
from ...errors import Conflict, InvalidRequest, NotFound, Unauthenticated
from ...rm.base import ResourceManager
from ...store import allocations as store
from ...store import reader, single_statement
from ..accounts.auth import AllocationPrincipal, AuthService, new_token, token_hash, user_of_row
from ..common.clock import Clock
from ..common.late import Late
from ..common.states import AllocState
from . import _rows as rows
from .gang import PORT_BASE, PORT_BLOCK, PORT_BLOCKS, Container, Gang, free_port
from .spec import with_run_as, with_user_token

log = logging.getLogger("det_jupyter.allocations")


class AllocationOwner(Protocol):
    """What owns allocations of a task type (trials now; notebooks and commands later)."""

    def build_specs_many(
        self, runs: Sequence[tuple[Any, Gang, str]], conn: sa.Connection
    ) -> Mapping[str, Sequence[TaskSpec]]:
        """The TaskSpecs (docs/internals.md) of a pass's placements (allocation row, gang,
        token), one per container, by allocation id; what starting the runs changes is written
        in ``conn`` (the placements' transaction)."""

    def allocations_exited(
        self, ended: Sequence[tuple[Any, int | None, str | None]], conn: sa.Connection
    ) -> list[Callable[[], None] | None]:
        """React to the end of a turn's allocations (allocation, exit code, reason): decide
        restart, completion, error, written in ``conn``'s transaction; returns, in order, what
        must run once it committed."""


@dataclass
class _Live:
    preempt: asyncio.Event
    kill_timer: asyncio.TimerHandle | None = None
    # The agents whose container has not exited yet, and the first failure among those that did.
    containers: set[str] = field(default_factory=set)
    failure: tuple[int, str | None] | None = None
    port: int | None = None
    # (task id, trial id) where this master placed it: then its preemption is this entry's
    # (``preempt`` is the only way to ask for one), and its task needs no lookup.
    task: tuple[str, int | None] | None = None


class AllocationService:
    """Allocations, and the :class:`~det_jupyter.rm.base.AllocationPort` a resource manager
    calls. ``owner`` (trials and commands) and ``launcher`` (the resource manager) close
    construction cycles: the composition root binds them once both sides exist."""

    def __init__(
        self, engine: sa.Engine, clock: Clock, auth: AuthService, *,
        owner: Late[AllocationOwner], launcher: Late[ResourceManager],
    ) -> None:
        self._next_block = random.randrange(PORT_BLOCKS)  # see _gang.free_port
        self._engine = engine
        self._reader = reader(engine)  # read-only work: no transaction round trips
        self._single = single_statement(engine)  # one-statement writes: no transaction round trips
        self._clock = clock
        self._auth = auth
        self._live: dict[str, _Live] = {}
        # token hash → principal, for allocations that have not ended; dropped in exited(),
        # the only way an allocation ends while this master runs.
        self._principals: dict[str, AllocationPrincipal] = {}
        self._owner = owner
        self._launcher = launcher
        self.on_change: Callable[[], None] = lambda: None
        self._pending_view: dict[str, scheduler.Request] | None = None  # see scheduler_view
        self._started: list[str] = []  # started() of this loop turn, written together
        self._exits: list[tuple[str, int | None, str | None, str]] = []  # exited_soon() of this turn
        self._flush_pending = False  # _flush_turn is scheduled
        self._jobs: dict[str, Any] = {}  # job id -> its scheduling settings, see _job

    @property
    def launcher(self) -> ResourceManager | None:
        """The resource manager, once bound (services used without one, in tests: None)."""
        return self._launcher.get() if self._launcher.bound else None

    def schedule_soon(self) -> None:
        """Ask the resource manager for a scheduling pass soon (nothing where none is bound:
        services used without one, in tests)."""
        launcher = self.launcher
        if launcher is not None:
            launcher.schedule_soon()

    # -- requests -----------------------------------------------------------------------

    def request(
        self,
        conn: sa.Connection,
        *,
        task_id: str,
        trial_id: int | None,
        slots: int,
        priority: int,
        resource_pool: str,
        job_id: str | None = None,
        before: int | None = None,
        requires: frozenset[str] = frozenset(),
    ) -> str:
        """Insert a PENDING allocation for ``task_id`` inside the caller's transaction
        (``before``: how many the task had, where the caller knows; ``requires``: the agent
        features it needs, e.g. ``docker`` for a task with an image)."""
        n = before if before is not None else store.count_of_task(conn, task_id)
        allocation_id = f"{task_id}.{n + 1}"
        now = self._clock.now()
        store.insert_pending(conn, allocation_id=allocation_id, task_id=task_id, trial_id=trial_id,
                             slots=slots, priority=priority, resource_pool=resource_pool, job_id=job_id,
                             submitted_at=now, requires=requires)
        if self._pending_view is not None:
            # Kept warm: a long queue is not read again for each new request. (Should the
            # caller's transaction roll back, placing the phantom finds no pending row and
            # drops the copy.)
            job = self._job(conn, job_id)
            self._pending_view[allocation_id] = scheduler.Request(
                allocation_id, slots, job.priority if job else priority,
                job.queue_position if job else now, resource_pool, job_id=job_id or "",
                weight=(job.weight if job else None) or 1.0, preemptible=trial_id is not None,
                max_slots=job.max_slots if job else None, requires=requires,
            )
        return allocation_id

    def _job(self, conn: sa.Connection, job_id: str | None) -> Any:
        """A job's scheduling settings (kept until ``invalidate``)."""
        if job_id is None:
            return None
        if job_id not in self._jobs:
            self._jobs[job_id] = store.job_settings(conn, job_id)
        return self._jobs[job_id]

    def pending(self) -> list[sa.Row]:
        with self._reader.connect() as conn:
            return store.pending(conn)

    def get(self, allocation_id: str) -> sa.Row:
        with self._reader.connect() as conn:
            row = store.get(conn, allocation_id)
        if row is None:
            raise NotFound(f"allocation {allocation_id} not found")
        return row

    # -- placement and running ----------------------------------------------------------

    def assign(self, allocation_id: str, gang: list[Container]) -> list[TaskSpec] | None:
        """Mark a pending allocation placed on ``gang`` (chief first) and return the specs to
        send, one per container; None if it is no longer pending."""
        return self.assign_many([(allocation_id, gang)]).get(allocation_id)

    def assign_many(
        self, placements: Sequence[tuple[str, list[Container]]]
    ) -> dict[str, list[TaskSpec]]:
        """``assign`` for a whole scheduling pass in one transaction: the specs of every
        allocation that was still pending."""
        if not placements:
            return {}
        taken = {live.port for live in self._live.values() if live.port is not None}
        placed: dict[str, tuple[list[TaskSpec], list[Container], int]] = {}
        owner = self._owner.get()
        now = self._clock.now()
        planned: dict[str, tuple[list[Container], str, int]] = {}  # by token hash
        for _, gang in placements:
            port = free_port(taken, self._next_block)
            self._next_block = ((port - PORT_BASE) // PORT_BLOCK + 1) % PORT_BLOCKS
            taken.add(port)
            token = new_token()
            planned[token_hash(token)] = (gang, token, port)
        params = [{"alloc_id": allocation_id, "agent_id": gang[0].agent_id,
                   "slot_ids": list(gang[0].slot_ids),
                   "placement": [[c.agent_id, list(c.slot_ids)] for c in gang],
                   "token_hash": key, "start_time": now}
                  for (allocation_id, _), (key, (gang, _, _)) in zip(placements, planned.items(), strict=True)]
        with self._engine.begin() as conn:
            # One statement per pass, whatever its size (executemany), then one read of what it
            # assigned: a placement whose allocation was no longer pending is absent.
            store.assign(conn, params)
            order = {key: i for i, key in enumerate(planned)}
            assigned = sorted(store.assigned_by_token(conn, list(planned)),
                              key=lambda a: order[a.token_hash])  # the pass's order
            if len(assigned) < len(placements):
                self.invalidate()  # the copy thought some pending
            # The runs' own writes (run ids, rewinds) commit with the placements.
            runs = []
            for alloc in assigned:
                gang, token, port = planned[alloc.token_hash]
                runs.append((alloc, Gang(tuple(gang), port, port + 1), token))
            specs_of = {allocation_id: list(specs)
                        for allocation_id, specs in owner.build_specs_many(runs, conn).items()}
            # Its owner's identity in every spec of every kind: a user token (DET_USER_TOKEN,
            # one per allocation, revoked when it ends) and run_as where the owner is linked.
            owners = self._auth.open_task_sessions(conn, [alloc.allocation_id for alloc, _, _ in runs])
            for allocation_id, (user_token, link) in owners.items():
                if allocation_id in specs_of:
                    specs_of[allocation_id] = [with_run_as(with_user_token(spec, user_token), link)
                                               for spec in specs_of[allocation_id]]
        for alloc, gang, _ in runs:
            placed[alloc.allocation_id] = (specs_of[alloc.allocation_id], list(gang.containers), gang.rendezvous_port)
            if self._pending_view is not None:
                self._pending_view.pop(alloc.allocation_id, None)
            self._live[alloc.allocation_id] = _Live(
                preempt=asyncio.Event(), containers={c.agent_id for c in gang.containers},
                port=gang.rendezvous_port, task=(alloc.task_id, alloc.trial_id))
        return {allocation_id: specs for allocation_id, (specs, _, _) in placed.items()}

    def pulling(self, allocation_id: str) -> None:
        """The agent pulls the image of its container: PULLING until it starts (rare and
        slow next to a pull, so written at once)."""
        with self._single.begin() as conn:
            changed = store.mark_pulling(conn, allocation_id)
        if changed:
            self.on_change()

    def started(self, allocation_id: str) -> None:
        """The agent started it. Starts that arrive in one event-loop turn are written in one
        statement at the end of the turn, in the transaction that ends the turn's exits (at
        once when no loop runs)."""
        self._started.append(allocation_id)
        self._flush_soon()

    def _flush_soon(self) -> None:
        if self._flush_pending:
            return  # a flush is already scheduled
        self._flush_pending = True
        try:
            asyncio.get_running_loop().call_soon(self._flush_turn)
        except RuntimeError:
            self._flush_turn()

    def exited(
        self, allocation_id: str, exit_code: int | None, reason: str | None,
        agent_id: str | None = None,
    ) -> None:
        """The allocation's processes on ``agent_id`` are gone (None: all of them, or it never
        started). Once every container has exited, finish it: the first failure is its exit
        (a failed container gets the others killed)."""
        ended = self._container_exited(allocation_id, exit_code, reason, agent_id)
        if ended is not None:
            self._end([(allocation_id, *ended)])

    def exited_soon(
        self, allocation_id: str, exit_code: int | None, reason: str | None, agent_id: str
    ) -> None:
        """``exited`` for agents' exit frames: those that arrive in one event-loop turn end in
        one transaction at the end of the turn (at once when no loop runs)."""
        self._exits.append((allocation_id, exit_code, reason, agent_id))
        self._flush_soon()

    def _flush_turn(self) -> None:
        """Write a loop turn's starts (RUNNING) and end its exits, in one transaction."""
        self._flush_pending = False
        started, self._started = self._started, []
        batch, self._exits = self._exits, []
        ended = []
        for allocation_id, exit_code, reason, agent_id in batch:
            done = self._container_exited(allocation_id, exit_code, reason, agent_id)
            if done is not None:
                ended.append((allocation_id, *done))
        if not ended:
            if started:
                with self._single.begin() as conn:
                    store.mark_running(conn, started)
                self.on_change()
            return
        try:
            self._end(ended, started)
        except Exception:  # one bad exit must not keep the others' allocations alive
            log.exception("ending %d allocations together failed; ending them one by one", len(ended))
            if started:
                with self._engine.begin() as conn:
                    store.mark_running(conn, started)
            for one in ended:
                try:
                    self._end([one])
                except Exception:
                    log.exception("ending allocation %s failed", one[0])

    def _container_exited(
        self, allocation_id: str, exit_code: int | None, reason: str | None, agent_id: str | None,
    ) -> tuple[int | None, str | None] | None:
        """Note one container's exit; the allocation's (exit code, reason) once it has ended."""
        live = self._live.get(allocation_id)
        if live is not None and agent_id is not None and len(live.containers) > 1:
            if agent_id not in live.containers:
                return None  # a repeated exit frame
            live.containers.discard(agent_id)
            if self.launcher is not None:
                self.launcher.released(allocation_id, agent_id)
            if exit_code != 0 and live.failure is None:
                # None (its agent left: a preemption) stays None: the others are killed, and
                # the allocation ends without blaming the task.
                live.failure = (exit_code, f"{reason or 'exited'} (on agent {agent_id})")
                for other in live.containers:
                    if self.launcher is not None:
                        self.launcher.kill(other, allocation_id)
            return None
        if live is not None and live.failure is not None:
            return live.failure
        return exit_code, reason

    def _end(self, ended: Sequence[tuple[str, int | None, str | None]], started: Sequence[str] = ()) -> None:
        """End allocations in one transaction (with ``started``'s RUNNING, if any), each with
        its owner's decision; then the effects that must follow the commit."""
        follows: list[tuple[str, Callable[[], None] | None]] = []
        owner = self._owner.get()
        now = self._clock.now()
        how: dict[str, tuple[int | None, str | None]] = {}
        for allocation_id, exit_code, reason in ended:
            how.setdefault(allocation_id, (exit_code, reason))  # a repeated exit: the first
        groups: dict[tuple[int | None, str | None], list[str]] = {}
        for allocation_id, outcome in how.items():
            groups.setdefault(outcome, []).append(allocation_id)
        order = {allocation_id: i for i, allocation_id in enumerate(how)}
        with self._engine.begin() as conn:
            if started:
                store.mark_running(conn, list(started))
            # One TERMINATE per distinct outcome (usually one for the whole turn), then each
            # owner's decision (theirs batched too: see OwnerRouter.allocations_exited).
            done = sorted(
                ((alloc, *outcome) for outcome, ids in groups.items()
                 for alloc in store.terminate(conn, ids, outcome[0], outcome[1], now)),
                key=lambda d: order[d[0].allocation_id])  # the exits' order
            follows = list(zip([d[0].allocation_id for d in done],
                               owner.allocations_exited(done, conn), strict=True))
            self._auth.revoke_task_sessions(conn, list(how))
        self._auth.forget_task_sessions(list(how))
        if started:
            self.on_change()
        for allocation_id, follow in follows:
            if self._pending_view is not None:
                self._pending_view.pop(allocation_id, None)
            for key in [k for k, p in self._principals.items() if p.allocation_id == allocation_id]:
                del self._principals[key]
            live = self._live.pop(allocation_id, None)
            if live is not None:
                if live.kill_timer is not None:
                    live.kill_timer.cancel()
                live.preempt.set()  # wake long-polls; they will see the allocation is gone
            if self.launcher is not None:
                self.launcher.released(allocation_id)
                self.launcher.schedule_soon()
            if follow is not None:
                follow()
        if follows:
            self.on_change()

    # -- stopping -----------------------------------------------------------------------

    def preempt(self, allocation_id: str, timeout_s: float) -> None:
        """Ask the task to checkpoint and exit; kill it if it has not within ``timeout_s``."""
        # One statement where it has started (the usual case); the row is read only otherwise.
        with self._single.begin() as conn:
            asked = store.ask_to_stop(conn, allocation_id)
        if not asked:
            alloc = self.get(allocation_id)
            if alloc.state == AllocState.PENDING.value:
                self.exited(allocation_id, None, "canceled before it started")
            return  # else it has ended
        live = self._live.setdefault(allocation_id, _Live(preempt=asyncio.Event()))
        live.preempt.set()
        if live.kill_timer is None:
            loop = asyncio.get_event_loop()
            live.kill_timer = loop.call_later(timeout_s, self.kill, allocation_id)

    def kill(self, allocation_id: str) -> str | None:
        """Stop the allocation now (SIGKILL on its agent; a pending one just ends). Returns
        the state it is now in where that is all the kill wrote (TERMINATING: on an agent), or
        None where it ended (it was pending) or had ended already."""
        # One statement where it is on an agent (the usual case); the row is read only otherwise.
        with self._single.begin() as conn:
            alloc = store.terminate_started(conn, allocation_id)
        if alloc is None:
            alloc = self.get(allocation_id)
            if alloc.state != AllocState.TERMINATED.value:
                self.exited(allocation_id, None, "killed before it started")
            return None
        launcher = self._launcher.get()
        for agent_id in rows.agents_of(alloc):
            launcher.kill(agent_id, allocation_id)
        return alloc.state

    # -- the task's own calls -----------------------------------------------------------

    def principal_for_token(self, token: str) -> AllocationPrincipal:
        key = token_hash(token)
        cached = self._principals.get(key)
        if cached is not None:
            return cached
        with self._reader.connect() as conn:
            row = store.principal(conn, key)
        if row is None or row.state == AllocState.TERMINATED.value:
            raise Unauthenticated("invalid allocation token (the task has ended)")
        # The owner's row comes with the allocation's (a task without an owner acts as admin).
        if row.owner_id is None:
            user = self._auth.user_by_name("admin")
        elif row.id is None:
            raise InvalidRequest(f"no user with id {row.owner_id}")
        else:
            user = user_of_row(row)
        principal = AllocationPrincipal(
            allocation_id=row.allocation_id,
            task_id=row.task_id,
            trial_id=row.trial_id,
            experiment_id=row.experiment_id,
            user=user,
        )
        self._principals[key] = principal
        return principal

    def task_of(self, allocation_id: str) -> tuple[str, int | None]:
        """The allocation's task id and trial id (None: not a trial's)."""
        live = self._live.get(allocation_id)
        if live is not None and live.task is not None:
            return live.task
        alloc = self.get(allocation_id)
        return alloc.task_id, alloc.trial_id

    def find_task(self, allocation_id: str) -> tuple[str, int | None] | None:
        """``task_of``, None where the allocation is unknown (``AllocationPort``)."""
        try:
            return self.task_of(allocation_id)
        except NotFound:
            return None

    async def wait_preemption(self, allocation_id: str, timeout_s: float) -> bool:
        """Block up to ``timeout_s`` until the allocation is asked to stop; the answer."""
        live = self._live.get(allocation_id)
        if live is None or live.task is None:  # not placed by this master: its row says
            alloc = self.get(allocation_id)
            if alloc.preempt_requested or alloc.state == AllocState.TERMINATED.value:
                return True
            live = self._live.setdefault(allocation_id, _Live(preempt=asyncio.Event()))
        if timeout_s > 0:
            try:
                await asyncio.wait_for(live.preempt.wait(), timeout=timeout_s)
            except asyncio.TimeoutError:
                pass
        return live.preempt.is_set()

    def ack_preemption(self, allocation_id: str) -> None:
        with self._engine.begin() as conn:
            acked = store.ack_preemption(conn, allocation_id)
        if not acked:
            raise Conflict(f"allocation {allocation_id} has ended; nothing to acknowledge")

    def placed(self) -> dict[str, tuple[str, list[str]]]:
        """The live allocations (after a restart: those to adopt): their state and agents, chief
        first (``AllocationPort``)."""
        return {row.allocation_id: (row.state, rows.agents_of(row)) for row in self.live_allocations()}

    def adopted(self, allocation_id: str) -> None:
        """The resource manager found the allocation still running after a master restart: it
        is this master's again (its gang's exits are counted; a preemption asked before the
        restart stands)."""
        alloc = self.get(allocation_id)
        if alloc.state == AllocState.TERMINATED.value:
            return
        live = self._live.setdefault(allocation_id, _Live(preempt=asyncio.Event()))
        live.containers = set(rows.agents_of(alloc))
        live.task = (alloc.task_id, alloc.trial_id)
        if alloc.preempt_requested:
            live.preempt.set()

    def live_allocations(self) -> list[sa.Row]:
        with self._reader.connect() as conn:
            return store.live(conn)

    def task_active(self, task_id: str) -> bool:
        """Whether the task still has an allocation waiting or running."""
        with self._reader.connect() as conn:
            return store.task_active(conn, task_id)

    def live_on(self, agent_id: str) -> dict[str, list[int]]:
        """The live allocations with a container on ``agent_id``, and their slots there."""
        out: dict[str, list[int]] = {}
        for alloc in self.live_allocations():
            for agent, slot_ids in rows.placement_of(alloc):
                if agent == agent_id:
                    out[alloc.allocation_id] = list(slot_ids)
        return out

    def invalidate(self) -> None:
        """Pending requests changed in the database behind this service's back (a job's
        settings were edited): the next scheduler view reads them again."""
        self._pending_view = None
        self._jobs.clear()

    def scheduler_view(self) -> tuple[list[scheduler.Request], list[scheduler.Running]]:
        """Pending and slot-holding allocations as the scheduler sees them, each with its job's
        priority, weight, max_slots and queue position.

        The pending part is kept between passes (a long queue is read once, not every pass):
        new requests join it, ``invalidate`` drops it, and an allocation leaves it when placed
        or ended. Every write to pending rows goes through this service (or calls
        ``invalidate``) in the event loop's thread, so the copy never lags a committed change.
        """
        running = [rows.as_running(r) for r in self._view_rows(*store.LIVE_STATES)]
        return list(self._waiting().values()), running

    def any_pending(self) -> bool:
        """Whether an allocation waits to be placed (from the kept pending view)."""
        return bool(self._waiting())

    def _waiting(self) -> dict[str, scheduler.Request]:
        if self._pending_view is None:
            waiting = self._view_rows(AllocState.PENDING.value)
            self._pending_view = {r.allocation_id: rows.as_request(r) for r in waiting}
        return self._pending_view

    def _view_rows(self, *states: str) -> list[Any]:
        with self._reader.connect() as conn:
            return store.view_rows(conn, states)

    def recover(self, *, keep_placed: bool = False) -> list[sa.Row]:
        """After a master restart: every allocation that was placed died with the old master
        (or will be killed when its agent says hello); end them without blaming the trial.
        ``keep_placed``: the resource manager re-adopts what still runs (Kubernetes Jobs
        outlive the master): placed allocations stay, and it ends those it does not find."""
        ended: list[Any] = []
        with self._engine.begin() as conn:
            for row in store.unfinished(conn):
                if row.state == AllocState.PENDING.value or keep_placed:
                    continue  # still wanted (the scheduler will place it), or to adopt
                store.end_after_restart(conn, row.allocation_id, self._clock.now())
                ended.append(row)
            self._auth.revoke_task_sessions(conn, None)  # the old master's tasks' user tokens
        return ended
