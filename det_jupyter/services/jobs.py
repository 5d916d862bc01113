"""The job queue, read-only: experiments with waiting or placed allocations, in queue order.

A job is an experiment (its ``job_id``). It is SCHEDULED while any of its allocations holds
slots and QUEUED while all of them wait. The order is the priority policy's: lower priority
number first, then earlier submission. A queued job carries the scheduler's own sentence for
why its first waiting request waits (``scheduler.wait_reason``) on the master's snapshot, so
the queue explains exactly what the next pass will see. Nothing here writes state.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from .. import scheduler
from ..store import reader
from ..store import tables as t
from ._states import LIVE_ALLOC, AllocState
from .views import Views

QUEUED = "STATE_QUEUED"
SCHEDULED = "STATE_SCHEDULED"

# The policies place a gang across agents when no single agent of its pool could hold it.
SPANS_AGENTS = True


@dataclass(frozen=True)
class Job:
    """One row of the queue; ``jobs_ahead`` counts jobs before it in its pool's order."""

    job_id: str
    experiment_id: int
    name: str
    username: str
    user_id: int
    workspace_id: int
    submitted_at: float
    resource_pool: str
    priority: int
    weight: float
    requested_slots: int
    allocated_slots: int
    progress: float
    state: str
    jobs_ahead: int
    wait_reason: str | None


@dataclass
class _Holdings:
    """What one experiment's unfinished allocations ask for and hold, and its job's settings."""

    workspace_id: int
    pool: str
    priority: int
    weight: float
    position: float
    requested: int = 0
    allocated: int = 0
    pending: list[str] = field(default_factory=list)


def queue(
    engine: sa.Engine,
    views: Views,
    snapshot: scheduler.Snapshot,
    *,
    pool: str = "",
    states: Collection[str] = (),
    descending: bool = False,
    offset: int = 0,
    limit: int = 0,
    policy: str = "priority",
) -> tuple[list[Job], int]:
    """One page of ``pool``'s queue ("" = the default pool) and how many jobs match.

    ``jobs_ahead`` is each job's place in the whole pool, before ``states`` filters and
    ``descending`` reverses the list, as Determined reports it.
    """
    holdings = _holdings(engine)
    wanted = scheduler.pool_of(pool)
    holdings = {exp_id: h for exp_id, h in holdings.items() if h.pool == wanted}
    exp_views, _ = views.experiments(ids=list(holdings)) if holdings else ([], 0)
    jobs = _ordered_jobs(exp_views, holdings, snapshot, policy)
    if states:
        jobs = [j for j in jobs if j.state in states]
    if descending:
        jobs.reverse()
    page = jobs[offset: offset + limit] if limit else jobs[offset:]
    return page, len(jobs)


def _holdings(engine: sa.Engine) -> dict[int, _Holdings]:
    """Per experiment: its unfinished allocations, summed (one query)."""
    q = (
        sa.select(
            t.allocations.c.allocation_id, t.allocations.c.state, t.allocations.c.slots,
            t.allocations.c.priority, t.allocations.c.resource_pool,
            t.trials.c.experiment_id, t.projects.c.workspace_id,
            t.jobs.c.priority.label("job_priority"), t.jobs.c.weight, t.jobs.c.queue_position,
        )
        .join(t.trials, t.trials.c.id == t.allocations.c.trial_id)
        .join(t.experiments, t.experiments.c.id == t.trials.c.experiment_id)
        .join(t.projects, t.projects.c.id == t.experiments.c.project_id)
        .outerjoin(t.jobs, t.jobs.c.job_id == t.experiments.c.job_id)
        .where(t.allocations.c.state != AllocState.TERMINATED.value)
    )
    out: dict[int, _Holdings] = {}
    with reader(engine).connect() as conn:
        for a in conn.execute(q):
            priority = a.job_priority if a.job_priority is not None else a.priority
            h = out.setdefault(
                a.experiment_id,
                _Holdings(a.workspace_id, scheduler.pool_of(a.resource_pool), priority,
                          a.weight or 1.0, a.queue_position or 0.0),
            )
            h.requested += a.slots
            if a.state in LIVE_ALLOC:
                h.allocated += a.slots
            elif a.state == AllocState.PENDING.value:
                h.pending.append(a.allocation_id)
    return out


def _ordered_jobs(
    exp_views: Iterable[Any], holdings: dict[int, _Holdings], snapshot: scheduler.Snapshot,
    policy: str,
) -> list[Job]:
    """The jobs of one pool in queue order, each with its place and, if queued, its reason."""
    rows = sorted(
        ((v, holdings[v.row.id]) for v in exp_views),
        key=lambda vh: (vh[1].priority, vh[1].position or vh[0].row.start_time, vh[0].row.job_id),
    )
    jobs = []
    for ahead, (v, h) in enumerate(rows):
        queued = h.allocated == 0
        jobs.append(Job(
            job_id=v.row.job_id,
            experiment_id=v.row.id,
            name=v.row.name,
            username=v.username,
            user_id=v.row.owner_id,
            workspace_id=h.workspace_id,
            submitted_at=v.row.start_time,
            resource_pool=h.pool,
            priority=h.priority,
            weight=h.weight,
            requested_slots=h.requested,
            allocated_slots=h.allocated,
            progress=float(v.progress or 0.0),
            state=QUEUED if queued else SCHEDULED,
            jobs_ahead=ahead,
            wait_reason=_reason(snapshot, v.row.job_id, policy) if queued else None,
        ))
    return jobs


def _reason(snap: scheduler.Snapshot, job_id: str, policy: str) -> str | None:
    """Why the job's first waiting request (in queue order) waits; None if the snapshot,
    taken a moment apart, holds none of its requests."""
    mine = sorted((r for r in snap.pending if r.job_id == job_id), key=scheduler.queue_key)
    if not mine:
        return None
    return scheduler.wait_reason(snap, mine[0], policy=policy, span_agents=SPANS_AGENTS)
