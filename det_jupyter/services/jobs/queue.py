"""The job queue, read-only: experiments with waiting or placed allocations, in queue order.

A job is an experiment (its ``job_id``). It is SCHEDULED while any of its allocations holds
slots and QUEUED while all of them wait. The order is the priority policy's: lower priority
number first, then earlier submission. A queued job carries the scheduler's own sentence for
why its first waiting request waits (``scheduler.wait_reason``) on the master's snapshot, so
the queue explains exactly what the next pass will see, with what the resource manager adds
about its cluster (``explain_wait``: Kubernetes names each node's room). A scheduled job whose
allocation holds slots but cannot start there (``placement_problem``: Kubernetes refuses its
pod, e.g. a namespace's quota) carries that as its reason. Nothing here writes state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

import sqlalchemy as sa

from ... import scheduler
from ...store import jobs as store
from ...store import reader
from ..common.states import LIVE_ALLOC
from ..experiments.views import progress_of

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
    job_type: str = "EXPERIMENT"
    entity_id: str = ""
    preemptible: bool = True


class Explains(Protocol):
    """What the queue asks of the resource manager beyond its snapshot (``rm.base``)."""

    def explain_wait(self, request: scheduler.Request, reason: str) -> str: ...
    def placement_problem(self, allocation_id: str) -> str | None: ...


class _Silent:
    """A resource manager with nothing to add."""

    def explain_wait(self, request: scheduler.Request, reason: str) -> str:
        return reason

    def placement_problem(self, allocation_id: str) -> str | None:
        return None


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


def queue(
    engine: sa.Engine,
    snapshot: scheduler.Snapshot,
    *,
    pool: str = "",
    states: Collection[str] = (),
    descending: bool = False,
    offset: int = 0,
    limit: int = 0,
    policy: str = "priority",
    rm: Explains | None = None,
) -> tuple[list[Job], int]:
    """One page of ``pool``'s queue ("" = the default pool) and how many jobs match.

    ``jobs_ahead`` is each job's place in the whole pool, before ``states`` filters and
    ``descending`` reverses the list, as Determined reports it. Everything is summed in SQL,
    so a queue of thousands of waiting trials costs a few rows per experiment. ``rm`` adds
    its cluster's causes to the reasons (``Explains``).
    """
    wanted = scheduler.pool_of(pool)
    holdings = {exp_id: h for exp_id, h in _holdings(engine).items() if h.pool == wanted}
    jobs = _in_queue_order(_experiment_jobs(engine, holdings) + _command_jobs(engine, wanted),
                           snapshot, policy, rm or _Silent())
    if states:
        jobs = [j for j in jobs if j.state in states]
    if descending:
        jobs.reverse()
    page = jobs[offset: offset + limit] if limit else jobs[offset:]
    return page, len(jobs)


def _holdings(engine: sa.Engine) -> dict[int, _Holdings]:
    """Per experiment: its unfinished allocations, summed, and its job's settings."""
    out: dict[int, _Holdings] = {}
    with reader(engine).connect() as conn:
        for exp_id, ws, rpool, alloc_prio, job_prio, weight, position, requested, allocated in (
                store.experiment_holdings(conn)):
            out[exp_id] = _Holdings(
                ws, scheduler.pool_of(rpool), job_prio if job_prio is not None else alloc_prio,
                weight or 1.0, position or 0.0, int(requested or 0), int(allocated or 0))
    return out


def _experiment_jobs(engine: sa.Engine, holdings: dict[int, _Holdings]) -> list[tuple]:
    """(sort key, job) for each experiment with unfinished allocations."""
    if not holdings:
        return []
    out = []
    with reader(engine).connect() as conn:
        trial_sums = {exp_id: (n, d) for exp_id, n, d in store.trial_sums(conn, list(holdings))}
        for r in store.experiments_with_owner(conn, list(holdings)):
            h = holdings[r.id]
            n, d = trial_sums.get(r.id, (0, 0.0))
            job = Job(
                job_id=r.job_id, experiment_id=r.id, name=r.name, username=r.username,
                user_id=r.owner_id, workspace_id=h.workspace_id, submitted_at=r.start_time,
                resource_pool=h.pool, priority=h.priority, weight=h.weight,
                requested_slots=h.requested, allocated_slots=h.allocated,
                progress=progress_of(r.progress, (r.config or {}).get("searcher", {}), n, float(d or 0.0)),
                state=QUEUED if h.allocated == 0 else SCHEDULED,
                jobs_ahead=0, wait_reason=None, entity_id=str(r.id),
            )
            out.append(((h.priority, h.position or r.start_time, job.job_id), job))
    return out


def _command_jobs(engine: sa.Engine, pool: str) -> list[tuple]:
    """(sort key, job) for each command that has not ended, in ``pool``."""
    out = []
    with reader(engine).connect() as conn:
        for r in store.unfinished_tasks(conn):
            if scheduler.pool_of(r.resource_pool) != pool:
                continue
            placed = r.state in LIVE_ALLOC
            job = Job(
                job_id=r.job_id, experiment_id=0, name=r.description, username=r.username,
                user_id=r.owner_id, workspace_id=1, submitted_at=r.start_time, resource_pool=pool,
                priority=r.priority, weight=r.weight, requested_slots=r.slots,
                allocated_slots=r.slots if placed else 0, progress=0.0,
                state=SCHEDULED if placed else QUEUED, jobs_ahead=0, wait_reason=None,
                job_type=r.task_type, entity_id=r.task_id, preemptible=False,
            )
            out.append(((r.priority, r.queue_position, r.job_id), job))
    return out


def _in_queue_order(entries: list[tuple], snapshot: scheduler.Snapshot, policy: str,
                    rm: Explains) -> list[Job]:
    """The jobs of one pool in queue order, each with its place and, if queued (or placed
    but held up by the cluster), its reason."""
    entries.sort(key=lambda e: e[0])
    return [
        dataclasses.replace(
            job, jobs_ahead=ahead,
            wait_reason=(_reason(snapshot, job.job_id, policy, rm) if job.state == QUEUED
                         else _held_up(snapshot, job.job_id, rm)),
        )
        for ahead, (_, job) in enumerate(entries)
    ]


def _reason(snap: scheduler.Snapshot, job_id: str, policy: str, rm: Explains) -> str | None:
    """Why the job's first waiting request (in queue order) waits; None if the snapshot,
    taken a moment apart, holds none of its requests."""
    mine = sorted((r for r in snap.pending if r.job_id == job_id), key=scheduler.queue_key)
    if not mine:
        return None
    reason = scheduler.wait_reason(snap, mine[0], policy=policy, span_agents=SPANS_AGENTS)
    return rm.explain_wait(mine[0], reason)


def _held_up(snap: scheduler.Snapshot, job_id: str, rm: Explains) -> str | None:
    """Why a scheduled job's placed allocation has not started, as its cluster says; None
    when nothing holds it up."""
    placed = sorted(r.allocation_id for r in snap.running if r.job_id == job_id)
    return next((why for why in map(rm.placement_problem, placed) if why), None)
