"""The job queue page (``det job list``) and a queued job's wait reason, in one call each.

The queue is read from the database (``queue.queue``) and explained against the resource
manager's current snapshot of the cluster; a page shows only the jobs the caller may see
(``Caller.visible_jobs``), counted as the whole pool's queue is.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ...errors import InvalidRequest
from . import queue as _queue
from .queue import Job

if TYPE_CHECKING:
    from ...config.resources import ResourceConfig
    from ...rm.base import ResourceManager
    from ..access.resolver import Caller


@dataclass(frozen=True)
class QueueQuery:
    """One page of a pool's queue, as ``det job list`` asks for it."""

    resource_pool: str = ""  # "": the default pool
    states: Collection[str] = ()
    descending: bool = False
    offset: int = 0
    limit: int = 0


class JobQueuePage:
    """Reads the job queue for the REST API; of the resource manager it asks its
    ``snapshot()`` of the cluster, and what it adds to the reasons (``queue.Explains``)."""

    def __init__(self, engine: sa.Engine, resources: ResourceConfig, rm: ResourceManager) -> None:
        self._engine = engine
        self._resources = resources
        self._rm = rm

    def _pool(self, requested: str, slots: int) -> str:
        return self._resources.pool_for(requested, slots)

    def page(self, caller: Caller, query: QueueQuery) -> tuple[list[Job], int]:
        """The jobs of one page that ``caller`` may see, and how many jobs match in all.
        InvalidRequest (naming the pools) for a pool the cluster does not have."""
        resources = self._resources
        pool = self._pool(query.resource_pool, 1)
        if pool not in resources.pools:
            raise InvalidRequest(f"resourcePool: pool {pool!r} does not exist; the pools are "
                                 f"{', '.join(sorted(resources.pools))}")
        page, total = _queue.queue(
            self._engine, self._rm.snapshot(),
            pool=pool, policy=resources.pools[pool].scheduler.type,
            states=query.states, descending=query.descending, offset=query.offset, limit=query.limit,
            rm=self._rm,
        )
        visible = caller.visible_jobs([j.job_id for j in page])
        if visible is not None:
            page = [j for j in page if j.job_id in visible]
        return page, total

    def wait_reason(self, job_id: str, config: dict[str, Any]) -> str | None:
        """Why job ``job_id`` (a task of config ``config``) waits in its pool's queue; None
        when it is not queued there."""
        waiting = self.waiting(job_id, config)
        return waiting[1] if waiting is not None else None

    def waiting(self, job_id: str, config: dict[str, Any]) -> tuple[int, str | None] | None:
        """How many jobs are ahead of job ``job_id`` in its pool's queue and why it waits;
        None when it is not queued there."""
        res = config.get("resources") or {}
        pool = self._pool(res.get("resource_pool") or "", res.get("slots", 1))
        page, _ = _queue.queue(self._engine, self._rm.snapshot(), pool=pool,
                               policy=self._resources.pools[pool].scheduler.type, rm=self._rm)
        found = next((j for j in page if j.job_id == job_id and j.state == _queue.QUEUED), None)
        return (found.jobs_ahead, found.wait_reason) if found is not None else None
