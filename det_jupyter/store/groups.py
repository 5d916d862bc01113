"""The user groups store: ``user_groups`` and their members (``group_members``).

Every function takes an open ``sa.Connection`` (the caller chooses the transaction) and plain
values; none checks names or raises domain errors (``services.accounts.groups`` does).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import sqlalchemy as sa

from . import _tables as t


def group(conn: sa.Connection, group_id: int) -> sa.Row | None:
    """The group's row (None: no such group)."""
    return conn.execute(sa.select(t.user_groups).where(t.user_groups.c.id == group_id)).first()


def name(conn: sa.Connection, group_id: int) -> str | None:
    """The group's name (None: no such group)."""
    return conn.execute(sa.select(t.user_groups.c.name).where(t.user_groups.c.id == group_id)).scalar()


def exists(conn: sa.Connection, group_id: int) -> bool:
    """Whether the group exists."""
    return conn.execute(sa.select(t.user_groups.c.id)
                        .where(t.user_groups.c.id == group_id)).first() is not None


def named(conn: sa.Connection, group_name: str) -> bool:
    """Whether a group of that name exists."""
    return conn.execute(sa.select(t.user_groups.c.id)
                        .where(t.user_groups.c.name == group_name)).first() is not None


def members(conn: sa.Connection, group_id: int) -> list[sa.Row]:
    """The members' users table rows, by id."""
    return list(conn.execute(
        sa.select(t.users).join(t.group_members, t.group_members.c.user_id == t.users.c.id)
        .where(t.group_members.c.group_id == group_id).order_by(t.users.c.id)).all())


def member_ids(conn: sa.Connection, group_id: int) -> set[int]:
    """The ids of the group's members."""
    m = t.group_members.c
    return set(conn.execute(sa.select(m.user_id).where(m.group_id == group_id)).scalars())


def of_user(conn: sa.Connection, user_id: int) -> list[int]:
    """The ids of the groups the user belongs to."""
    return list(conn.execute(sa.select(t.group_members.c.group_id)
                             .where(t.group_members.c.user_id == user_id)).scalars())


def search(conn: sa.Connection, *, user_id: int | None, group_name: str | None, offset: int,
           limit: int) -> tuple[list[sa.Row], int]:
    """A page of groups (``id``, ``name``, ``n``: their number of members) by exact name and/or
    that ``user_id`` belongs to, by id, and the total that match; ``limit`` 0 means all."""
    g, m = t.user_groups.c, t.group_members.c
    where = []
    if group_name:
        where.append(g.name == group_name)
    if user_id is not None:
        where.append(g.id.in_(sa.select(m.group_id).where(m.user_id == user_id)))
    count = (sa.select(sa.func.count()).select_from(t.group_members)
             .where(m.group_id == g.id).scalar_subquery())
    q = sa.select(g.id, g.name, count.label("n")).where(*where).order_by(g.id).offset(offset)
    if limit:
        q = q.limit(limit)
    total = conn.execute(sa.select(sa.func.count()).select_from(t.user_groups).where(*where)).scalar_one()
    return list(conn.execute(q).all()), total


def insert(conn: sa.Connection, group_name: str) -> int:
    """Store a group; its new id."""
    key = conn.execute(sa.insert(t.user_groups).values(name=group_name)).inserted_primary_key
    if key is None:
        raise RuntimeError("the insert made no primary key")
    return int(key[0])


def rename(conn: sa.Connection, group_id: int, group_name: str) -> None:
    """Rename the group."""
    conn.execute(sa.update(t.user_groups).where(t.user_groups.c.id == group_id).values(name=group_name))


def add_members(conn: sa.Connection, group_id: int, user_ids: Iterable[int]) -> None:
    """Make the users members (one statement each; none may be a member already)."""
    for uid in user_ids:
        conn.execute(sa.insert(t.group_members).values(group_id=group_id, user_id=uid))


def remove_members(conn: sa.Connection, group_id: int, user_ids: Sequence[int]) -> None:
    """Remove the users from the group."""
    m = t.group_members.c
    conn.execute(sa.delete(t.group_members).where(m.group_id == group_id, m.user_id.in_(user_ids)))


def delete(conn: sa.Connection, group_id: int) -> None:
    """Delete the group with its role assignments and memberships."""
    conn.execute(sa.delete(t.role_assignments).where(t.role_assignments.c.group_id == group_id))
    conn.execute(sa.delete(t.group_members).where(t.group_members.c.group_id == group_id))
    conn.execute(sa.delete(t.user_groups).where(t.user_groups.c.id == group_id))


def existing_users(conn: sa.Connection, user_ids: Sequence[int]) -> set[int]:
    """Those of ``user_ids`` that are users."""
    return set(conn.execute(sa.select(t.users.c.id).where(t.users.c.id.in_(user_ids))).scalars())
