"""The task log store: lines in the order they were stored, read with filters.

Every function takes an open ``sa.Connection`` (the caller chooses the transaction) and plain
values; rows come back as SQLAlchemy rows of the ``task_logs`` table (or the columns named).
What a line's level is, and which lines an agent sent twice, are the log service's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from . import _tables as t


@dataclass(frozen=True)
class LogFilter:
    """Which lines a log query returns (each empty field: any)."""

    levels: tuple[str, ...] = ()
    rank_ids: tuple[int, ...] = ()
    agent_ids: tuple[str, ...] = ()
    allocation_ids: tuple[str, ...] = ()
    stdtypes: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    search_text: str | None = None  # a substring
    after: float | None = None
    before: float | None = None

    def where(self) -> list[Any]:
        c = t.task_logs.c
        out: list[Any] = []
        for column, values in ((c.level, self.levels), (c.rank_id, self.rank_ids), (c.agent_id, self.agent_ids),
                               (c.allocation_id, self.allocation_ids), (c.stdtype, self.stdtypes),
                               (c.source, self.sources)):
            if values:
                out.append(column.in_(values))
        if self.search_text:
            out.append(c.log.contains(self.search_text, autoescape=True))
        if self.after is not None:
            out.append(c.timestamp > self.after)
        if self.before is not None:
            out.append(c.timestamp < self.before)
        return out


NO_FILTER = LogFilter()


def last_seq(conn: sa.Connection, allocation_id: str, agent_id: str) -> int:
    """The highest ``seq`` stored of one container's lines (-1: none)."""
    return conn.execute(
        sa.select(sa.func.coalesce(sa.func.max(t.task_logs.c.seq), -1)).where(
            t.task_logs.c.allocation_id == allocation_id,
            t.task_logs.c.agent_id == agent_id,
        )
    ).scalar_one()


def insert(conn: sa.Connection, rows: list[dict[str, Any]]) -> None:
    """Store lines (``task_logs`` columns by name), in one statement (executemany)."""
    conn.execute(sa.insert(t.task_logs), rows)


def query(
    conn: sa.Connection, *, trial_id: int | None = None, task_id: str | None = None, after_id: int = 0,
    limit: int | None = None, descending: bool = False, where: LogFilter = NO_FILTER,
) -> list[sa.Row]:
    """Stored lines in order (``descending``: newest first), ``where`` they match, of the trial
    or task given, with an id above ``after_id``; at most ``limit`` of them (0 or None: all)."""
    q = sa.select(t.task_logs).where(*where.where())
    if trial_id is not None:
        q = q.where(t.task_logs.c.trial_id == trial_id)
    if task_id is not None:
        q = q.where(t.task_logs.c.task_id == task_id)
    if after_id:
        q = q.where(t.task_logs.c.id > after_id)
    q = q.order_by(t.task_logs.c.id.desc() if descending else t.task_logs.c.id)
    if limit:
        q = q.limit(limit)
    return list(conn.execute(q))


def max_id(conn: sa.Connection) -> int:
    """The id of the last line stored (0: none)."""
    return conn.execute(sa.select(sa.func.coalesce(sa.func.max(t.task_logs.c.id), 0))).scalar_one()


def lines_after(conn: sa.Connection, after_id: int, limit: int) -> Sequence[sa.Row]:
    """``id``, ``task_id``, ``trial_id``, ``agent_id`` and ``log`` of up to ``limit`` lines
    stored after ``after_id``, in order."""
    l = t.task_logs.c  # noqa: E741
    return conn.execute(sa.select(l.id, l.task_id, l.trial_id, l.agent_id, l.log)
                        .where(l.id > after_id).order_by(l.id).limit(limit)).all()
