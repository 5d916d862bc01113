"""Resource-pool-to-workspace bindings: rows of (pool, workspace)."""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa

from . import _tables as t

_B = t.pool_bindings.c


def workspaces_of(conn: sa.Connection, pool: str) -> list[int]:
    """The workspaces ``pool`` is bound to, by id."""
    return list(
        conn.execute(
            sa.select(_B.workspace_id).where(_B.pool_name == pool).order_by(_B.workspace_id)
        ).scalars()
    )


def pools_of(conn: sa.Connection, workspace_id: int) -> list[str]:
    """The pools bound to ``workspace_id``."""
    return list(
        conn.execute(
            sa.select(_B.pool_name).where(_B.workspace_id == workspace_id).order_by(_B.pool_name)
        ).scalars()
    )


def bound_pools(conn: sa.Connection) -> set[str]:
    """Every pool bound to at least one workspace."""
    return set(conn.execute(sa.select(_B.pool_name).distinct()).scalars())


def add(conn: sa.Connection, pool: str, workspace_ids: Iterable[int]) -> None:
    rows = [{"pool_name": pool, "workspace_id": w} for w in workspace_ids]
    if rows:
        conn.execute(sa.insert(t.pool_bindings), rows)


def remove(conn: sa.Connection, pool: str, workspace_ids: Iterable[int]) -> int:
    ids = list(workspace_ids)
    return conn.execute(
        sa.delete(t.pool_bindings).where(_B.pool_name == pool, _B.workspace_id.in_(ids))
    ).rowcount


def clear(conn: sa.Connection, pool: str) -> None:
    conn.execute(sa.delete(t.pool_bindings).where(_B.pool_name == pool))


def workspace_ids_by_id(conn: sa.Connection, ids: list[int]) -> set[int]:
    """Which of ``ids`` are workspaces."""
    w = t.workspaces.c
    return set(conn.execute(sa.select(w.id).where(w.id.in_(ids))).scalars())


def workspace_ids_by_name(conn: sa.Connection, names: list[str]) -> dict[str, int]:
    w = t.workspaces.c
    return dict(conn.execute(sa.select(w.name, w.id).where(w.name.in_(names))).tuples().all())


def allocations_between(conn: sa.Connection, start: float, end: float) -> list[sa.Row]:
    """Allocations that ran during [start, end]: id, task, slots, pool, times, owner's
    username, experiment id and labels (None for a task that is no trial)."""
    a, j, u, tr, e = t.allocations.c, t.jobs.c, t.users.c, t.trials.c, t.experiments.c
    q = (
        sa.select(
            a.allocation_id,
            a.task_id,
            a.slots,
            a.resource_pool,
            a.start_time,
            a.end_time,
            j.job_type,
            u.username,
            tr.experiment_id,
            e.labels,
        )
        .select_from(
            t.allocations.outerjoin(t.jobs, j.job_id == a.job_id)
            .outerjoin(t.users, u.id == j.owner_id)
            .outerjoin(t.trials, tr.id == a.trial_id)
            .outerjoin(t.experiments, e.id == tr.experiment_id)
        )
        .where(
            a.start_time.is_not(None),
            a.start_time <= end,
            sa.or_(a.end_time.is_(None), a.end_time >= start),
        )
        .order_by(a.start_time)
    )
    return list(conn.execute(q))
