"""The accounts store: users (with their agent user links), login sessions, access tokens and
the user tokens of tasks — all rows of ``users``, ``agent_user_groups`` and ``user_sessions``.

Every function takes an open ``sa.Connection`` (the caller chooses the transaction) and plain
values; rows come back as SQLAlchemy rows. User rows read with the link hold the users table's
columns and ``agent_uid``, ``agent_gid``, ``agent_user``, ``agent_group`` (NULLs when
unlinked). None checks names or passwords, hashes anything or raises domain errors
(``services.accounts`` does).

The statements a request runs on every token check (``session_user``, ``user_by_id``) and a
placement runs for its tasks (``allocation_owners``) are built once, here: building a
statement and its cache key per call cost more than running it on SQLite.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from . import _tables as t

# The kinds of ``user_sessions`` rows.
LOGIN_KIND = "session"  # a login session (det user login)
ACCESS_KIND = "access"  # a long-lived access token (det token create)
TASK_KIND = "task"  # a task's user token (DET_USER_TOKEN), naming its allocation

_LINK = t.agent_user_groups.c
# A user's columns and their agent user link (NULLs when unlinked).
USER_COLUMNS = (*t.users.c, _LINK.uid.label("agent_uid"), _LINK.gid.label("agent_gid"),
                _LINK.user_name.label("agent_user"), _LINK.group_name.label("agent_group"))
USERS_LINKED = t.users.outerjoin(t.agent_user_groups, _LINK.user_id == t.users.c.id)


def select_users(*extra: Any) -> sa.Select:
    """Users with their agent user links (and the ``extra`` columns)."""
    return sa.select(*USER_COLUMNS, *extra).select_from(USERS_LINKED)


def _new_id(result: sa.CursorResult[Any]) -> int:
    """The primary key an insert of one row made."""
    key = result.inserted_primary_key
    if key is None:
        raise RuntimeError("the insert made no primary key")
    return int(key[0])


_SESSION_USER = (select_users(t.user_sessions.c.expires_at, t.user_sessions.c.revoked)
                 .join(t.user_sessions, t.user_sessions.c.user_id == t.users.c.id)
                 .where(t.user_sessions.c.token_hash == sa.bindparam("key")))
_USER_BY_ID = select_users().where(t.users.c.id == sa.bindparam("target"))
# Who owns each allocation (its trial's experiment's owner, or its command's) and the owner's
# agent user link.
_OWNER_ID = sa.func.coalesce(t.experiments.c.owner_id, t.commands.c.owner_id)
_ALLOCATION_OWNERS = (
    sa.select(t.allocations.c.allocation_id, _OWNER_ID.label("owner_id"),
              *(c for c in USER_COLUMNS if c.name.startswith("agent_")))
    .select_from(t.allocations)
    .join(t.trials, t.trials.c.id == t.allocations.c.trial_id, isouter=True)
    .join(t.experiments, t.experiments.c.id == t.trials.c.experiment_id, isouter=True)
    .join(t.commands, t.commands.c.task_id == t.allocations.c.task_id, isouter=True)
    .join(t.agent_user_groups, _LINK.user_id == _OWNER_ID, isouter=True)
    .where(t.allocations.c.allocation_id.in_(sa.bindparam("ids", expanding=True)))
)


# -- users ----------------------------------------------------------------------------------


def count_users(conn: sa.Connection) -> int:
    """How many users there are."""
    return conn.execute(sa.select(sa.func.count()).select_from(t.users)).scalar_one()


def insert_user(conn: sa.Connection, **values: Any) -> int:
    """Store a user (``values`` name the users table's columns); its new id."""
    return _new_id(conn.execute(sa.insert(t.users).values(**values)))


def update_user(conn: sa.Connection, user_id: int, **values: Any) -> None:
    """Set the user's columns named in ``values``."""
    conn.execute(sa.update(t.users).where(t.users.c.id == user_id).values(**values))


def user_by_id(conn: sa.Connection, user_id: int) -> sa.Row | None:
    """The user's row, with its link (None: no such user)."""
    return conn.execute(_USER_BY_ID, {"target": user_id}).first()


def user_by_name(conn: sa.Connection, username: str) -> sa.Row | None:
    """The user's row of that name, with its link (None: there is none)."""
    return conn.execute(select_users().where(t.users.c.username == username)).first()


def plain_user_by_name(conn: sa.Connection, username: str) -> sa.Row | None:
    """The users table's row of that name, without the link (None: there is none)."""
    return conn.execute(sa.select(t.users).where(t.users.c.username == username)).first()


def user_id_by_name(conn: sa.Connection, username: str) -> int | None:
    """The id of the user of that name (None: there is none)."""
    row = conn.execute(sa.select(t.users.c.id).where(t.users.c.username == username)).first()
    return None if row is None else row.id


def all_users(conn: sa.Connection) -> list[sa.Row]:
    """Every user, with its link, by id."""
    return list(conn.execute(select_users().order_by(t.users.c.id)))


def users_page(conn: sa.Connection, *, active: bool | None, admin: bool | None, name: str | None,
               sort: str, descending: bool, offset: int, limit: int) -> tuple[list[sa.Row], int]:
    """A page of users (with links) and the total that match: ``active``, ``admin`` where not
    None; ``name`` a substring of the user or display name, any case. Sorted by the column
    ``sort`` then id; ``limit`` 0 means all."""
    u = t.users.c
    where: list[sa.ColumnElement[bool]] = []
    if active is not None:
        where.append(u.active.is_(active))
    if admin is not None:
        where.append(u.admin.is_(admin))
    if name:
        pattern = f"%{name.lower()}%"
        where.append(sa.or_(sa.func.lower(u.username).like(pattern),
                            sa.func.lower(sa.func.coalesce(u.display_name, "")).like(pattern)))
    col = u[sort]
    q = select_users().where(*where).order_by(col.desc() if descending else col.asc(), u.id)
    if limit:
        q = q.limit(limit)
    total = conn.execute(sa.select(sa.func.count()).select_from(t.users).where(*where)).scalar_one()
    rows = conn.execute(q.offset(offset)).all()
    return list(rows), total


def name_and_active(conn: sa.Connection, user_id: int) -> sa.Row | None:
    """The user's ``username`` and ``active`` (None: no such user)."""
    return conn.execute(sa.select(t.users.c.username, t.users.c.active)
                        .where(t.users.c.id == user_id)).first()


def set_link(conn: sa.Connection, user_id: int,
             link: tuple[int, int, str | None, str | None] | None) -> None:
    """Link the user with an agent user, ``(uid, gid, user name, group name)``; None: unlink."""
    conn.execute(sa.delete(t.agent_user_groups).where(t.agent_user_groups.c.user_id == user_id))
    if link is not None:
        uid, gid, user_name, group_name = link
        conn.execute(sa.insert(t.agent_user_groups).values(
            user_id=user_id, uid=uid, gid=gid, user_name=user_name, group_name=group_name))


# -- sessions and tokens ----------------------------------------------------------------------


def session_user(conn: sa.Connection, key: str) -> sa.Row | None:
    """The user (with link) of the session or token whose hash is ``key``, with the session's
    ``expires_at`` and ``revoked`` (None: no such token). One statement, built once."""
    return conn.execute(_SESSION_USER, {"key": key}).first()


def open_session(conn: sa.Connection, user_id: int, key: str, created_at: float, expires_at: float) -> None:
    """Store a login session whose token hash is ``key``."""
    conn.execute(sa.insert(t.user_sessions).values(
        user_id=user_id, token_hash=key, created_at=created_at, expires_at=expires_at, revoked=False))


def revoke_login_session(conn: sa.Connection, key: str) -> None:
    """Revoke the login session whose token hash is ``key`` (an access token is left alone)."""
    conn.execute(
        sa.update(t.user_sessions)
        .where(t.user_sessions.c.token_hash == key, t.user_sessions.c.kind == LOGIN_KIND)
        .values(revoked=True)
    )


def revoke_login_sessions(conn: sa.Connection, user_id: int, *, keep: str | None = None) -> None:
    """Revoke the user's login sessions (not access tokens), except the one whose hash is ``keep``."""
    s = t.user_sessions.c
    q = sa.update(t.user_sessions).where(s.user_id == user_id, s.kind == LOGIN_KIND, s.revoked.is_(False))
    if keep:
        q = q.where(s.token_hash != keep)
    conn.execute(q.values(revoked=True))


def allocation_owners(conn: sa.Connection, allocation_ids: Sequence[str]) -> list[sa.Row]:
    """Each of the allocations (``allocation_id``) with its owner (``owner_id``, None: none)
    and the owner's link (``agent_uid`` …). One statement, built once."""
    return list(conn.execute(_ALLOCATION_OWNERS, {"ids": list(allocation_ids)}))


def insert_sessions(conn: sa.Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Store many sessions at once (each dict names the user_sessions table's columns)."""
    conn.execute(sa.insert(t.user_sessions), list(rows))


def revoke_task_sessions(conn: sa.Connection, allocation_ids: Sequence[str] | None, *, ended_state: str) -> None:
    """Revoke the unrevoked task tokens of the allocations; None: of every allocation that is in
    ``ended_state`` or gone (and of tokens that name none)."""
    s = t.user_sessions.c
    q = sa.update(t.user_sessions).where(s.kind == TASK_KIND, s.revoked.is_(False))
    if allocation_ids is None:
        live = sa.select(t.allocations.c.allocation_id).where(t.allocations.c.state != ended_state)
        q = q.where(sa.or_(s.allocation_id.is_(None), s.allocation_id.not_in(live)))
    else:
        q = q.where(s.allocation_id.in_(list(allocation_ids)))
    conn.execute(q.values(revoked=True))


def insert_access_token(conn: sa.Connection, user_id: int, key: str, created_at: float, expires_at: float,
                        description: str | None) -> int:
    """Store an access token whose hash is ``key``; its new id."""
    return _new_id(conn.execute(sa.insert(t.user_sessions).values(
        user_id=user_id, token_hash=key, created_at=created_at, expires_at=expires_at, revoked=False,
        kind=ACCESS_KIND, description=description)))


def access_token(conn: sa.Connection, token_id: int) -> sa.Row | None:
    """The access token's ``user_sessions`` row (None: no access token of that id)."""
    s = t.user_sessions.c
    return conn.execute(sa.select(t.user_sessions).where(s.id == token_id, s.kind == ACCESS_KIND)).first()


def update_token(conn: sa.Connection, token_id: int, **values: Any) -> None:
    """Set the token's columns named in ``values``."""
    conn.execute(sa.update(t.user_sessions).where(t.user_sessions.c.id == token_id).values(**values))


def access_tokens_page(conn: sa.Connection, *, user_id: int | None, owner: str | None,
                       ids: Sequence[int], live_at: float | None, sort: str, descending: bool,
                       offset: int, limit: int) -> tuple[list[sa.Row], int]:
    """A page of access tokens and the total that match: of ``user_id`` and of the user named
    ``owner`` where given; ``ids`` where given, else only those unrevoked and unexpired at
    ``live_at`` where that is given. Sorted by the column ``sort`` then id; ``limit`` 0: all."""
    s = t.user_sessions.c
    where = [s.kind == ACCESS_KIND]
    if user_id is not None:
        where.append(s.user_id == user_id)
    if owner:
        where.append(s.user_id == sa.select(t.users.c.id).where(t.users.c.username == owner).scalar_subquery())
    if ids:
        where.append(s.id.in_(ids))
    elif live_at is not None:
        where += [s.revoked.is_(False), s.expires_at >= live_at]
    col = s[sort]
    q = sa.select(t.user_sessions).where(*where).order_by(col.desc() if descending else col.asc(), s.id)
    if limit:
        q = q.limit(limit)
    total = conn.execute(sa.select(sa.func.count()).select_from(t.user_sessions).where(*where)).scalar_one()
    rows = conn.execute(q.offset(offset)).all()
    return list(rows), total
