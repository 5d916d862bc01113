"""The task store: commands and the proxied kinds (notebooks, TensorBoards, shells), each a row
of ``commands`` with one allocation.

Every function takes an open ``sa.Connection`` (the caller chooses the transaction) and plain
values; rows come back as SQLAlchemy rows. Which kinds are proxied, what is sealed and who may
see a task are the services'.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import sqlalchemy as sa

from . import _tables as t
from .allocations import RUNNING, TERMINATED


def _listing() -> sa.Select:
    """Tasks with their user and their latest allocation's state (a generic task unpaused
    has more than one; every other kind has one)."""
    later = t.allocations.alias("later")
    latest = ~sa.exists().where(later.c.task_id == t.allocations.c.task_id,
                                later.c.submitted_at > t.allocations.c.submitted_at)
    return (
        sa.select(
            t.commands, t.users.c.username, t.jobs.c.resource_pool.label("job_pool"),
            t.jobs.c.priority, t.allocations.c.allocation_id,
            t.allocations.c.state.label("alloc_state"), t.allocations.c.resource_pool,
        )
        .join(t.users, t.users.c.id == t.commands.c.owner_id)
        .join(t.jobs, t.jobs.c.job_id == t.commands.c.job_id)
        .outerjoin(t.allocations, sa.and_(t.allocations.c.task_id == t.commands.c.task_id, latest))
    )


# One task by id, built once: building the listing's join (and its cache key) per call cost
# three times what running it does on SQLite.
_GET = _listing().where(t.commands.c.task_id == sa.bindparam("target"))


def insert(
    conn: sa.Connection, *, task_id: str, job_id: str, owner_id: int, description: str,
    config: Mapping[str, Any], context: bytes | None, start_time: float, task_type: str,
    workspace_id: int,
) -> None:
    """Store a new task (its job is ``jobs.insert_job``'s)."""
    conn.execute(sa.insert(t.commands).values(
        task_id=task_id, job_id=job_id, owner_id=owner_id, description=description,
        config=config, context=context, start_time=start_time, task_type=task_type,
        workspace_id=workspace_id,
    ))


def get(conn: sa.Connection, task_id: str) -> sa.Row | None:
    """The task's row with ``username``, ``job_pool``, ``priority``, ``allocation_id``,
    ``alloc_state`` and ``resource_pool`` (None: no such task)."""
    return conn.execute(_GET, {"target": task_id}).first()


def listing(conn: sa.Connection, kinds: Collection[str], owner_id: int | None = None) -> list[sa.Row]:
    """Tasks of ``kinds`` as ``get`` reads them, oldest first; ``owner_id``'s only if given."""
    q = _listing().where(t.commands.c.task_type.in_(kinds)).order_by(t.commands.c.start_time)
    if owner_id is not None:
        q = q.where(t.commands.c.owner_id == owner_id)
    return list(conn.execute(q))


def running_proxied(conn: sa.Connection, kinds: Collection[str]) -> list[sa.Row]:
    """The running tasks of ``kinds`` that have an address: ``task_id``, ``task_type``,
    ``owner_id``, ``proxy_address``, ``proxy_token``, ``allocation_id``, and of the config only
    ``idle_timeout``, ``idle_type`` and ``hub_prefix`` (extracted by the database)."""
    c, a = t.commands.c, t.allocations.c
    q = (sa.select(c.task_id, c.task_type, c.owner_id, c.proxy_address, c.proxy_token,
                   a.allocation_id,
                   c.config["idle_timeout"].as_float().label("idle_timeout"),
                   c.config["notebook_idle_type"].as_string().label("idle_type"),
                   c.config["hub_prefix"].as_string().label("hub_prefix"))
         .join(t.allocations, a.task_id == c.task_id)
         .where(c.task_type.in_(kinds), a.state == RUNNING,
                c.proxy_address.is_not(None)))
    return list(conn.execute(q))


def secrets_of(conn: sa.Connection, kinds: Collection[str]) -> list[sa.Row]:
    """``task_id``, ``proxy_token`` and ``config`` of every task of ``kinds``."""
    c = t.commands.c
    return list(conn.execute(sa.select(c.task_id, c.proxy_token, c.config).where(c.task_type.in_(kinds))))


def rewrite_secrets(conn: sa.Connection, changes: Mapping[str, Mapping[str, Any]]) -> None:
    """Write new ``proxy_token`` and/or ``config`` values, by task id. On SQLite the old values'
    bytes are zeroed in the file (``secure_delete``); PostgreSQL keeps old row versions until a
    VACUUM."""
    sqlite = conn.dialect.name == "sqlite"
    if sqlite:
        conn.exec_driver_sql("PRAGMA secure_delete=ON")
    for task_id, values in changes.items():
        conn.execute(sa.update(t.commands).where(t.commands.c.task_id == task_id).values(**values))
    if sqlite:
        conn.exec_driver_sql("PRAGMA secure_delete=OFF")


def context(conn: sa.Connection, task_id: str) -> bytes | None:
    """The task's context archive (None: it has none, or no such task)."""
    return conn.execute(sa.select(t.commands.c.context).where(t.commands.c.task_id == task_id)).scalar()


def set_exit_reason(conn: sa.Connection, task_id: str, reason: str) -> None:
    conn.execute(sa.update(t.commands).where(t.commands.c.task_id == task_id).values(exit_reason=reason))


def set_config_key(conn: sa.Connection, task_id: str, key: str, value: Any) -> None:
    """One key of the task's config (a generic task's state), inside the caller's transaction."""
    config = conn.execute(sa.select(t.commands.c.config).where(t.commands.c.task_id == task_id)).scalar()
    if config is None:
        return
    conn.execute(sa.update(t.commands).where(t.commands.c.task_id == task_id)
                 .values(config={**config, key: value}))


def resumed(conn: sa.Connection, task_id: str) -> None:
    """A paused task runs again: how its last allocation ended no longer describes it."""
    conn.execute(sa.update(t.commands).where(t.commands.c.task_id == task_id)
                 .values(end_time=None, exit_code=None, exit_reason=None))


def with_owner(conn: sa.Connection, task_id: str) -> tuple[sa.Row, str]:
    """The task's ``commands`` row and its owner's user name (NoResultFound: no such task)."""
    cmd = conn.execute(sa.select(t.commands).where(t.commands.c.task_id == task_id)).one()
    owner = conn.execute(sa.select(t.users.c.username).where(t.users.c.id == cmd.owner_id)).scalar_one()
    return cmd, owner


def set_proxy(conn: sa.Connection, task_id: str, address: str, token: str) -> None:
    """Where the proxy reaches the task, and the (sealed) token it sends."""
    conn.execute(sa.update(t.commands).where(t.commands.c.task_id == task_id).values(
        proxy_address=address, proxy_token=token))


def set_proxy_address(conn: sa.Connection, task_id: str, allocation_id: str, address: str) -> bool:
    """A new proxy address of the task, while ``allocation_id`` is a live allocation of it and
    it has one already (a proxied kind, placed); False when nothing was written."""
    c, a = t.commands.c, t.allocations.c
    live = sa.exists().where(a.allocation_id == allocation_id, a.task_id == task_id, a.state != TERMINATED)
    done = conn.execute(sa.update(t.commands).where(
        c.task_id == task_id, c.proxy_address.is_not(None), live).values(proxy_address=address))
    return bool(done.rowcount)


def ended(conn: sa.Connection, task_id: str, exit_code: int | None, end_time: float,
          reason: str | None) -> None:
    """The task's allocation ended; a reason already set (e.g. culled as idle) wins over
    ``reason``."""
    conn.execute(
        sa.update(t.commands).where(t.commands.c.task_id == task_id)
        .values(exit_code=exit_code, end_time=end_time,
                exit_reason=sa.func.coalesce(t.commands.c.exit_reason, reason))
    )
