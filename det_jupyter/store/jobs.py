"""The job store: a job's scheduling settings (priority, weight, max slots, pool, place in line)
and the sums the job queue is read from.

Every function takes an open ``sa.Connection`` (the caller chooses the transaction) and plain
values; rows come back as SQLAlchemy rows. What an edit may change, and the queue's order and
wait reasons, are the services'.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from . import _tables as t
from .allocations import LIVE_STATES, PENDING, TERMINATED

# -- a job's settings ---------------------------------------------------------------------


def insert_job(
    conn: sa.Connection, *, job_id: str, job_type: str, owner_id: int, priority: int, weight: float,
    max_slots: int | None, resource_pool: str, queue_position: float, submitted_at: float,
) -> None:
    """Store a job."""
    conn.execute(sa.insert(t.jobs).values(
        job_id=job_id, job_type=job_type, owner_id=owner_id, priority=priority, weight=weight,
        max_slots=max_slots, resource_pool=resource_pool, queue_position=queue_position,
        submitted_at=submitted_at,
    ))


def get(conn: sa.Connection, job_id: str) -> sa.Row | None:
    """The job's row (None: no such job)."""
    return conn.execute(sa.select(t.jobs).where(t.jobs.c.job_id == job_id)).first()


def update(conn: sa.Connection, job_id: str, values: Mapping[str, Any]) -> None:
    """Set the job's columns named in ``values``."""
    conn.execute(sa.update(t.jobs).where(t.jobs.c.job_id == job_id).values(**values))


def move_pending(conn: sa.Connection, job_id: str, *, zero_slots: bool, resource_pool: str) -> None:
    """The job's pending allocations of no slots (``zero_slots``) or of some, to ``resource_pool``."""
    slots_of = t.allocations.c.slots
    conn.execute(
        sa.update(t.allocations)
        .where(t.allocations.c.job_id == job_id,
               t.allocations.c.state == PENDING,
               (slots_of == 0) if zero_slots else (slots_of > 0))
        .values(resource_pool=resource_pool))


def neighbour_position(conn: sa.Connection, priority: int, moving: str, other: Any, *,
                       ahead: bool) -> float | None:
    """The queue position of the job of ``priority`` nearest ``other`` (a job row) on its
    ``ahead`` side (else behind it), ``moving`` and ``other`` aside; None: there is none."""
    j = t.jobs.c
    near = sa.select(j.queue_position).where(
        j.priority == priority, j.job_id != moving, j.job_id != other.job_id,
        (j.queue_position < other.queue_position) if ahead else (j.queue_position > other.queue_position),
    ).order_by(j.queue_position.desc() if ahead else j.queue_position).limit(1)
    return conn.execute(near).scalar()


def experiment_of_job(conn: sa.Connection, job_id: str) -> sa.Row | None:
    """The ``id`` and ``config`` of the job's experiment (None: not an experiment's job)."""
    return conn.execute(sa.select(t.experiments.c.id, t.experiments.c.config)
                        .where(t.experiments.c.job_id == job_id)).first()


def set_experiment_config(conn: sa.Connection, exp_id: int, config: Mapping[str, Any]) -> None:
    conn.execute(sa.update(t.experiments).where(t.experiments.c.id == exp_id).values(config=config))


def job_of_experiment(conn: sa.Connection, exp_id: int) -> str | None:
    """The experiment's job id (None: no such experiment)."""
    return conn.execute(sa.select(t.experiments.c.job_id).where(t.experiments.c.id == exp_id)).scalar()


# -- the queue ----------------------------------------------------------------------------


def experiment_holdings(conn: sa.Connection) -> list[sa.Row]:
    """Per experiment with unfinished allocations, summed: (experiment id, workspace id, least
    pool, least allocation priority, job priority, job weight, job queue position, slots
    requested, slots held); the job's columns None where it has no job row."""
    a = t.allocations.c
    live = sa.case((a.state.in_(LIVE_STATES), a.slots), else_=0)
    q = (
        sa.select(
            t.trials.c.experiment_id, t.projects.c.workspace_id, sa.func.min(a.resource_pool),
            sa.func.min(a.priority), t.jobs.c.priority, t.jobs.c.weight, t.jobs.c.queue_position,
            sa.func.sum(a.slots), sa.func.sum(live),
        )
        .select_from(t.allocations)
        .join(t.trials, t.trials.c.id == a.trial_id)
        .join(t.experiments, t.experiments.c.id == t.trials.c.experiment_id)
        .join(t.projects, t.projects.c.id == t.experiments.c.project_id)
        .outerjoin(t.jobs, t.jobs.c.job_id == t.experiments.c.job_id)
        .where(a.state != TERMINATED)
        .group_by(t.trials.c.experiment_id, t.projects.c.workspace_id, t.jobs.c.priority,
                  t.jobs.c.weight, t.jobs.c.queue_position)
    )
    return list(conn.execute(q))


def trial_sums(conn: sa.Connection, exp_ids: list[int]) -> list[sa.Row]:
    """Per experiment of ``exp_ids``: (experiment id, trials, progress summed: a COMPLETED trial
    counts 1.0, another its progress)."""
    tr = t.trials.c
    done = sa.func.sum(sa.case((tr.state == "COMPLETED", 1.0), else_=sa.func.coalesce(tr.progress, 0.0)))
    sums = (
        sa.select(tr.experiment_id, sa.func.count(), done)
        .where(tr.experiment_id.in_(exp_ids))
        .group_by(tr.experiment_id)
    )
    return list(conn.execute(sums))


def experiments_with_owner(conn: sa.Connection, exp_ids: list[int]) -> list[sa.Row]:
    """``id``, ``name``, ``owner_id``, ``start_time``, ``job_id``, ``progress``, ``config`` and
    ``username`` of the experiments of ``exp_ids``."""
    e = t.experiments.c
    rows = (
        sa.select(e.id, e.name, e.owner_id, e.start_time, e.job_id, e.progress, e.config,
                  t.users.c.username)
        .join(t.users, t.users.c.id == e.owner_id)
        .where(e.id.in_(exp_ids))
    )
    return list(conn.execute(rows))


def unfinished_tasks(conn: sa.Connection) -> list[sa.Row]:
    """Each task (command or proxied kind) whose allocation has not ended, with its job's
    settings and its allocation's ``state``, ``slots`` and ``resource_pool``."""
    a = t.allocations
    q = (
        sa.select(t.commands.c.task_id, t.commands.c.description, t.commands.c.owner_id,
                  t.commands.c.start_time, t.commands.c.task_type, t.users.c.username,
                  t.jobs.c.job_id, t.jobs.c.priority,
                  t.jobs.c.weight, t.jobs.c.queue_position, a.c.state, a.c.slots, a.c.resource_pool)
        .join(t.jobs, t.jobs.c.job_id == t.commands.c.job_id)
        .join(t.users, t.users.c.id == t.commands.c.owner_id)
        .join(a, a.c.task_id == t.commands.c.task_id)
        .where(a.c.state != TERMINATED)
    )
    return list(conn.execute(q))
