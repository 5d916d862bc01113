"""The cluster-wide message's rows: the newest one counts; setting one ends the others."""

from __future__ import annotations

import sqlalchemy as sa

from . import tables as t

_NEWEST = sa.select(t.cluster_messages).order_by(t.cluster_messages.c.created_time.desc(),
                                                 t.cluster_messages.c.id.desc()).limit(1)


def newest(conn: sa.Connection) -> sa.Row | None:
    """The newest message, whether it has ended or not."""
    return conn.execute(_NEWEST).first()


def end_current(conn: sa.Connection, now: float) -> int:
    """End every message that has not ended by ``now``; how many were."""
    c = t.cluster_messages.c
    return conn.execute(sa.update(t.cluster_messages)
                        .where(sa.or_(c.end_time.is_(None), c.end_time >= now))
                        .values(end_time=now)).rowcount


def insert(conn: sa.Connection, *, message: str, start_time: float, end_time: float | None,
           created_by: int, created_time: float) -> None:
    conn.execute(sa.insert(t.cluster_messages).values(
        message=message, start_time=start_time, end_time=end_time, created_by=created_by,
        created_time=created_time))
