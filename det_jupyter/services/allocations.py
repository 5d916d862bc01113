"""Allocations: one run of a task on an agent's slots — tokens, preemption, exit.

An allocation is PENDING until the scheduler places it, ASSIGNED once sent to an agent,
RUNNING once the agent started it, TERMINATED when its processes are gone. Its token is valid
only while it is not TERMINATED. Preemption is cooperative: the task long-polls
``signals/preemption``, acks, and exits 0; one that does not is killed after its timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import sqlalchemy as sa

from ..errors import Conflict, NotFound, Unauthenticated
from ..store import reader
from ..store import tables as t
from ._clock import Clock
from ._states import AllocState
from .auth import AllocationPrincipal, AuthService, new_token, token_hash


class AllocationOwner(Protocol):
    """What owns allocations of a task type (trials now; notebooks and commands later)."""

    def build_spec(self, alloc: sa.Row, agent_id: str, slot_ids: list[int], token: str) -> dict:
        """The TaskSpec (docs/internals.md) for a run of ``alloc`` on those slots."""

    def allocation_exited(self, alloc: sa.Row, exit_code: int | None, reason: str | None) -> None:
        """React to the end of an allocation (decide restart, completion, error)."""


class Launcher(Protocol):
    """The resource manager side: how to start and kill placed allocations."""

    def start(self, agent_id: str, allocation_id: str, spec: dict) -> None: ...

    def kill(self, agent_id: str, allocation_id: str) -> None: ...

    def schedule_soon(self) -> None: ...

    def released(self, allocation_id: str) -> None: ...


@dataclass
class _Live:
    preempt: asyncio.Event
    kill_timer: asyncio.TimerHandle | None = None


class AllocationService:
    def __init__(self, engine: sa.Engine, clock: Clock, auth: AuthService) -> None:
        self._engine = engine
        self._reader = reader(engine)  # read-only work: no transaction round trips
        self._clock = clock
        self._auth = auth
        self._live: dict[str, _Live] = {}
        # token hash → principal, for allocations that have not ended; dropped in exited(),
        # the only way an allocation ends while this master runs.
        self._principals: dict[str, AllocationPrincipal] = {}
        self.owner: AllocationOwner | None = None
        self.launcher: Launcher | None = None
        self.on_change: Callable[[], None] = lambda: None

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
    ) -> str:
        """Insert a PENDING allocation for ``task_id`` inside the caller's transaction."""
        n = conn.execute(
            sa.select(sa.func.count()).select_from(t.allocations).where(t.allocations.c.task_id == task_id)
        ).scalar_one()
        allocation_id = f"{task_id}.{n + 1}"
        conn.execute(
            sa.insert(t.allocations).values(
                allocation_id=allocation_id,
                task_id=task_id,
                trial_id=trial_id,
                state=AllocState.PENDING.value,
                slots=slots,
                priority=priority,
                resource_pool=resource_pool,
                submitted_at=self._clock.now(),
                preempt_requested=False,
                acked_preemption=False,
            )
        )
        return allocation_id

    def pending(self) -> list[sa.Row]:
        with self._reader.connect() as conn:
            return list(
                conn.execute(
                    sa.select(t.allocations).where(t.allocations.c.state == AllocState.PENDING.value)
                )
            )

    def get(self, allocation_id: str) -> sa.Row:
        with self._reader.connect() as conn:
            row = conn.execute(
                sa.select(t.allocations).where(t.allocations.c.allocation_id == allocation_id)
            ).first()
        if row is None:
            raise NotFound(f"allocation {allocation_id} not found")
        return row

    # -- placement and running ----------------------------------------------------------

    def assign(self, allocation_id: str, agent_id: str, slot_ids: list[int]) -> dict | None:
        """Mark a pending allocation placed and return the spec to send, or None if gone."""
        token = new_token()
        with self._engine.begin() as conn:
            updated = conn.execute(
                sa.update(t.allocations)
                .where(
                    t.allocations.c.allocation_id == allocation_id,
                    t.allocations.c.state == AllocState.PENDING.value,
                )
                .values(
                    state=AllocState.ASSIGNED.value,
                    agent_id=agent_id,
                    slot_ids=list(slot_ids),
                    token_hash=token_hash(token),
                    start_time=self._clock.now(),
                )
            ).rowcount
            if not updated:
                return None
            alloc = conn.execute(
                sa.select(t.allocations).where(t.allocations.c.allocation_id == allocation_id)
            ).one()
        self._live[allocation_id] = _Live(preempt=asyncio.Event())
        assert self.owner is not None
        return self.owner.build_spec(alloc, agent_id, list(slot_ids), token)

    def started(self, allocation_id: str) -> None:
        with self._engine.begin() as conn:
            conn.execute(
                sa.update(t.allocations)
                .where(
                    t.allocations.c.allocation_id == allocation_id,
                    t.allocations.c.state == AllocState.ASSIGNED.value,
                )
                .values(state=AllocState.RUNNING.value)
            )
        self.on_change()

    def exited(self, allocation_id: str, exit_code: int | None, reason: str | None) -> None:
        """The allocation's processes are gone (or it never started): finish it."""
        with self._engine.begin() as conn:
            alloc = conn.execute(
                sa.select(t.allocations).where(t.allocations.c.allocation_id == allocation_id)
            ).first()
            if alloc is None or alloc.state == AllocState.TERMINATED.value:
                return
            conn.execute(
                sa.update(t.allocations)
                .where(t.allocations.c.allocation_id == allocation_id)
                .values(
                    state=AllocState.TERMINATED.value,
                    exit_code=exit_code,
                    exit_reason=reason,
                    token_hash=None,
                    end_time=self._clock.now(),
                )
            )
            alloc = conn.execute(
                sa.select(t.allocations).where(t.allocations.c.allocation_id == allocation_id)
            ).one()
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
        assert self.owner is not None
        self.owner.allocation_exited(alloc, exit_code, reason)
        self.on_change()

    # -- stopping -----------------------------------------------------------------------

    def preempt(self, allocation_id: str, timeout_s: float) -> None:
        """Ask the task to checkpoint and exit; kill it if it has not within ``timeout_s``."""
        alloc = self.get(allocation_id)
        if alloc.state == AllocState.TERMINATED.value:
            return
        if alloc.state == AllocState.PENDING.value:
            self.exited(allocation_id, None, "canceled before it started")
            return
        with self._engine.begin() as conn:
            conn.execute(
                sa.update(t.allocations)
                .where(t.allocations.c.allocation_id == allocation_id)
                .values(preempt_requested=True)
            )
        live = self._live.setdefault(allocation_id, _Live(preempt=asyncio.Event()))
        live.preempt.set()
        if live.kill_timer is None:
            loop = asyncio.get_event_loop()
            live.kill_timer = loop.call_later(timeout_s, self.kill, allocation_id)

    def kill(self, allocation_id: str) -> None:
        """Stop the allocation now (SIGKILL on its agent; a pending one just ends)."""
        alloc = self.get(allocation_id)
        if alloc.state == AllocState.TERMINATED.value:
            return
        if alloc.state == AllocState.PENDING.value or alloc.agent_id is None:
            self.exited(allocation_id, None, "killed before it started")
            return
        with self._engine.begin() as conn:
            conn.execute(
                sa.update(t.allocations)
                .where(t.allocations.c.allocation_id == allocation_id)
                .values(state=AllocState.TERMINATING.value)
            )
        assert self.launcher is not None
        self.launcher.kill(alloc.agent_id, allocation_id)

    # -- the task's own calls -----------------------------------------------------------

    def principal_for_token(self, token: str) -> AllocationPrincipal:
        key = token_hash(token)
        cached = self._principals.get(key)
        if cached is not None:
            return cached
        with self._reader.connect() as conn:
            row = conn.execute(
                sa.select(
                    t.allocations.c.allocation_id,
                    t.allocations.c.task_id,
                    t.allocations.c.trial_id,
                    t.allocations.c.state,
                    t.trials.c.experiment_id,
                    t.experiments.c.owner_id,
                )
                .select_from(t.allocations)
                .join(t.trials, t.trials.c.id == t.allocations.c.trial_id, isouter=True)
                .join(t.experiments, t.experiments.c.id == t.trials.c.experiment_id, isouter=True)
                .where(t.allocations.c.token_hash == key)
            ).first()
        if row is None or row.state == AllocState.TERMINATED.value:
            raise Unauthenticated("invalid allocation token (the task has ended)")
        user = self._auth.user_by_id(row.owner_id) if row.owner_id is not None else self._auth.user_by_name("admin")
        principal = AllocationPrincipal(
            allocation_id=row.allocation_id,
            task_id=row.task_id,
            trial_id=row.trial_id,
            experiment_id=row.experiment_id,
            user=user,
        )
        self._principals[key] = principal
        return principal

    async def wait_preemption(self, allocation_id: str, timeout_s: float) -> bool:
        """Block up to ``timeout_s`` until the allocation is asked to stop; the answer."""
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
            n = conn.execute(
                sa.update(t.allocations)
                .where(
                    t.allocations.c.allocation_id == allocation_id,
                    t.allocations.c.state != AllocState.TERMINATED.value,
                )
                .values(acked_preemption=True)
            ).rowcount
        if not n:
            raise Conflict(f"allocation {allocation_id} has ended; nothing to acknowledge")

    def live_allocations(self) -> list[sa.Row]:
        with self._reader.connect() as conn:
            return list(
                conn.execute(
                    sa.select(t.allocations).where(
                        t.allocations.c.state.in_(
                            [AllocState.ASSIGNED.value, AllocState.RUNNING.value, AllocState.TERMINATING.value]
                        )
                    )
                )
            )

    def recover(self) -> list[sa.Row]:
        """After a master restart: every allocation that was placed died with the old master
        (or will be killed when its agent says hello); end them without blaming the trial."""
        ended: list[Any] = []
        with self._engine.begin() as conn:
            rows = list(
                conn.execute(
                    sa.select(t.allocations).where(t.allocations.c.state != AllocState.TERMINATED.value)
                )
            )
            for row in rows:
                if row.state == AllocState.PENDING.value:
                    continue  # still wanted; the scheduler will place it
                conn.execute(
                    sa.update(t.allocations)
                    .where(t.allocations.c.allocation_id == row.allocation_id)
                    .values(
                        state=AllocState.TERMINATED.value,
                        exit_reason="the master restarted",
                        token_hash=None,
                        end_time=self._clock.now(),
                    )
                )
                ended.append(row)
        return ended

