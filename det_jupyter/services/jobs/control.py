"""Editing the job queue: priority, weight, max_slots, resource pool and place in line.

``POST /api/v1/job-queues`` (``det job update``) and ``PATCH /api/v1/experiments/{id}``
(``det e set priority|weight|max-slots``) both end here. A batch of updates is checked whole
before anything is written, so a bad entry changes nothing. Pending allocations follow their
job at the next pass (the scheduler reads the job's settings); running ones keep their slots.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ...errors import InvalidRequest, NotFound
from ...store import jobs as store
from ..accounts.auth import User

if TYPE_CHECKING:
    from ...config.resources import ResourceConfig


@dataclass(frozen=True)
class QueueUpdate:
    """One ``v1QueueControl``: what to change of one job (None = leave as is)."""

    job_id: str
    priority: int | None = None
    weight: float | None = None
    resource_pool: str | None = None
    ahead_of: str | None = None
    behind_of: str | None = None
    max_slots: int | None = None
    clear_max_slots: bool = False

    def __post_init__(self) -> None:
        if self.priority is not None and (
            isinstance(self.priority, bool) or not isinstance(self.priority, int)
            or not 1 <= self.priority <= 99
        ):
            raise InvalidRequest(f"priority must be an integer from 1 to 99, got {self.priority!r}")
        if self.weight is not None and (
            isinstance(self.weight, bool) or not isinstance(self.weight, (int, float))
            or not self.weight > 0
        ):
            raise InvalidRequest(f"weight must be a number greater than 0, got {self.weight!r}")
        if self.max_slots is not None and (
            isinstance(self.max_slots, bool) or not isinstance(self.max_slots, int)
            or self.max_slots < 0
        ):
            raise InvalidRequest(f"max_slots must be an integer >= 0, got {self.max_slots!r}")
        if self.ahead_of and self.behind_of:
            raise InvalidRequest("give aheadOf or behindOf, not both")
        if self.job_id in (self.ahead_of, self.behind_of):
            raise InvalidRequest(f"job {self.job_id} cannot be moved relative to itself")


class JobControl:
    def __init__(self, engine: sa.Engine, resources: ResourceConfig, changed: Callable[[], None]) -> None:
        self._engine = engine
        self._resources = resources
        self._changed = changed  # asks for a scheduling pass

    def update(self, user: User, updates: Sequence[QueueUpdate], *, strict: bool = True) -> None:
        """Apply every update in one transaction, or none. ``strict``: as the queue API, refuse
        a priority on a pool whose scheduler ignores it (and a weight likewise)."""
        with self._engine.begin() as conn:
            for u in updates:
                self._apply(conn, user, u, strict)
        self._changed()

    def _apply(self, conn: sa.Connection, user: User, u: QueueUpdate, strict: bool) -> None:
        job = self._job(conn, u.job_id)  # who may change it: the caller's role check
        values: dict[str, Any] = {}
        pool = job.resource_pool
        if u.resource_pool is not None:
            try:
                self._resources.check_pool(u.resource_pool, "resourcePool")
            except ValueError as exc:
                raise InvalidRequest(str(exc)) from exc
            values["resource_pool"] = pool = u.resource_pool
        kind = self._scheduler_of(pool)
        if u.priority is not None:
            if strict and kind != "priority":
                raise InvalidRequest(
                    f"pool {self._effective(pool)!r} uses the {kind} scheduler, which ignores "
                    "priority; set weight instead")
            values["priority"] = u.priority
        if u.weight is not None:
            if strict and kind != "fair_share":
                raise InvalidRequest(
                    f"pool {self._effective(pool)!r} uses the {kind} scheduler, which ignores "
                    "weight; set priority instead")
            values["weight"] = float(u.weight)
        if u.max_slots is not None or u.clear_max_slots:
            values["max_slots"] = u.max_slots
        other_id = u.ahead_of or u.behind_of
        if other_id:
            other = self._job(conn, other_id)
            if self._effective(other.resource_pool) != self._effective(pool):
                raise InvalidRequest(
                    f"job {other_id} is in pool {self._effective(other.resource_pool)!r}, not "
                    f"{self._effective(pool)!r}; a job moves only within its pool")
            priority = values.get("priority", job.priority)
            if kind == "priority":
                priority = other.priority  # to stand next to it, take its priority
                values["priority"] = priority
            values["queue_position"] = self._position_next_to(
                conn, other, priority, u.job_id, ahead=bool(u.ahead_of))
        if not values:
            return
        store.update(conn, u.job_id, values)
        if "resource_pool" in values:
            # Waiting work follows the job; what runs keeps its slots until it ends.
            for zero in (False, True):
                target = self._resources.pool_for(values["resource_pool"], 0 if zero else 1)
                store.move_pending(conn, u.job_id, zero_slots=zero, resource_pool=target)
        self._mirror_config(conn, u.job_id, values)

    def _position_next_to(
        self, conn: sa.Connection, other: Any, priority: int, moving: str, *, ahead: bool
    ) -> float:
        """A queue position just ahead of (or behind) ``other`` among jobs of ``priority``."""
        neighbour = store.neighbour_position(conn, priority, moving, other, ahead=ahead)
        if neighbour is None:
            return other.queue_position - 1.0 if ahead else other.queue_position + 1.0
        return (neighbour + other.queue_position) / 2

    def _mirror_config(self, conn: sa.Connection, job_id: str, values: dict[str, Any]) -> None:
        """Keep the experiment's config showing what its job now has (``det e describe``)."""
        keys = {"priority": "priority", "weight": "weight", "max_slots": "max_slots",
                "resource_pool": "resource_pool"}
        changed = {keys[k]: v for k, v in values.items() if k in keys}
        if not changed:
            return
        exp = store.experiment_of_job(conn, job_id)
        if exp is None:
            return
        config = dict(exp.config)
        config["resources"] = {**(config.get("resources") or {}), **changed}
        store.set_experiment_config(conn, exp.id, config)

    def _job(self, conn: sa.Connection, job_id: str) -> Any:
        row = store.get(conn, job_id)
        if row is None:
            raise NotFound(f"job {job_id} not found; det job list shows the queue's job ids")
        return row

    def _effective(self, pool: str) -> str:
        return self._resources.pool_for(pool, 1)

    def _scheduler_of(self, pool: str) -> str:
        return self._resources.pools[self._effective(pool)].scheduler.type

    def job_of_experiment(self, exp_id: int) -> str:
        with self._engine.connect() as conn:
            job = store.job_of_experiment(conn, exp_id)
        if job is None:
            raise NotFound(f"experiment {exp_id} not found")
        return job
