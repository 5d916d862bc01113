"""User groups: named sets of users that roles can be assigned to (``det user-group``).

A membership change changes what the members may do, so it drops RbacService's cached
grants before returning. Deleting a group deletes its memberships and its role assignments.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa

from ...errors import Conflict, InvalidRequest, NotFound
from ...store import reader
from ...store import tables as t
from ..access.rbac import RbacService
from ..common import names as _names
from .auth import User, user_of_row

MAX_NAME = 255


@dataclass(frozen=True)
class Group:
    id: int
    name: str
    num_members: int = 0
    members: tuple[User, ...] = ()


def check_group_name(name: object) -> str:
    """A group name by ``_names.check_name``'s rules, at most ``MAX_NAME`` characters."""
    return _names.check_name("group name", name, max_len=MAX_NAME)


def user_ids(value: object, what: str) -> tuple[int, ...]:
    """A list of user ids from a request body (``addUsers``/``removeUsers``)."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool)
                                              for v in value):
        raise InvalidRequest(f"{what} must be a list of user ids (integers)")
    return tuple(dict.fromkeys(value))


class GroupService:
    def __init__(self, engine: sa.Engine, rbac: RbacService) -> None:
        self._engine = engine
        self._reader = reader(engine)
        self._rbac = rbac

    def get(self, group_id: int) -> Group:
        """The group with its members."""
        with self._reader.connect() as conn:
            row = conn.execute(sa.select(t.user_groups).where(t.user_groups.c.id == group_id)).first()
            if row is None:
                raise NotFound(f"group {group_id} not found")
            members = conn.execute(
                sa.select(t.users).join(t.group_members, t.group_members.c.user_id == t.users.c.id)
                .where(t.group_members.c.group_id == group_id).order_by(t.users.c.id)).all()
        users = tuple(user_of_row(m) for m in members)
        return Group(row.id, row.name, len(users), users)

    def search(self, *, user_id: int | None = None, name: str | None = None, offset: int = 0,
               limit: int = 0) -> tuple[list[Group], int]:
        """Groups (with member counts) by exact ``name`` and/or that ``user_id`` belongs to;
        ``limit`` 0 means all."""
        if offset < 0 or limit < 0:
            raise InvalidRequest("offset and limit must not be negative")
        g, m = t.user_groups.c, t.group_members.c
        where = []
        if name:
            where.append(g.name == name)
        if user_id is not None:
            where.append(g.id.in_(sa.select(m.group_id).where(m.user_id == user_id)))
        count = (sa.select(sa.func.count()).select_from(t.group_members)
                 .where(m.group_id == g.id).scalar_subquery())
        q = sa.select(g.id, g.name, count.label("n")).where(*where).order_by(g.id).offset(offset)
        if limit:
            q = q.limit(limit)
        with self._reader.connect() as conn:
            total = conn.execute(sa.select(sa.func.count()).select_from(t.user_groups)
                                 .where(*where)).scalar_one()
            rows = conn.execute(q).all()
        return [Group(r.id, r.name, r.n) for r in rows], total

    def create(self, name: object, add_users: Iterable[int] = ()) -> Group:
        name = check_group_name(name)
        add_users = tuple(add_users)
        with self._engine.begin() as conn:
            self._check_name_free(conn, name)
            self._check_users(conn, add_users)
            group_id = conn.execute(sa.insert(t.user_groups).values(name=name)).inserted_primary_key[0]
            for uid in add_users:
                conn.execute(sa.insert(t.group_members).values(group_id=group_id, user_id=uid))
        self._rbac.invalidate()
        return self.get(group_id)

    def update(self, group_id: int, *, name: object = None, add_users: Iterable[int] = (),
               remove_users: Iterable[int] = ()) -> Group:
        """Rename and/or change members. Adding a member twice is harmless; removing a user
        who is not a member is refused (it usually means the wrong user or group)."""
        add, remove = tuple(add_users), tuple(remove_users)
        both = set(add) & set(remove)
        if both:
            raise InvalidRequest(f"users {sorted(both)} are both added and removed; say one")
        if name is not None:
            name = check_group_name(name)
        m = t.group_members.c
        with self._engine.begin() as conn:
            current = conn.execute(sa.select(t.user_groups.c.name)
                                   .where(t.user_groups.c.id == group_id)).scalar()
            if current is None:
                raise NotFound(f"group {group_id} not found")
            if name is not None and name != current:
                self._check_name_free(conn, name)
                conn.execute(sa.update(t.user_groups).where(t.user_groups.c.id == group_id)
                             .values(name=name))
            self._check_users(conn, add + remove)
            members = set(conn.execute(sa.select(m.user_id).where(m.group_id == group_id)).scalars())
            missing = [u for u in remove if u not in members]
            if missing:
                raise InvalidRequest(f"users {missing} are not members of group {current!r}")
            for uid in add:
                if uid not in members:
                    conn.execute(sa.insert(t.group_members).values(group_id=group_id, user_id=uid))
            if remove:
                conn.execute(sa.delete(t.group_members)
                             .where(m.group_id == group_id, m.user_id.in_(remove)))
        self._rbac.invalidate()
        return self.get(group_id)

    def delete(self, group_id: int) -> None:
        with self._engine.begin() as conn:
            if conn.execute(sa.select(t.user_groups.c.id)
                            .where(t.user_groups.c.id == group_id)).first() is None:
                raise NotFound(f"group {group_id} not found")
            conn.execute(sa.delete(t.role_assignments).where(t.role_assignments.c.group_id == group_id))
            conn.execute(sa.delete(t.group_members).where(t.group_members.c.group_id == group_id))
            conn.execute(sa.delete(t.user_groups).where(t.user_groups.c.id == group_id))
        self._rbac.invalidate()

    @staticmethod
    def _check_name_free(conn: sa.Connection, name: str) -> None:
        if conn.execute(sa.select(t.user_groups.c.id).where(t.user_groups.c.name == name)).first():
            raise Conflict(f"a group named {name!r} already exists")

    @staticmethod
    def _check_users(conn: sa.Connection, ids: Iterable[int]) -> None:
        ids = tuple(ids)
        if not ids:
            return
        found = set(conn.execute(sa.select(t.users.c.id).where(t.users.c.id.in_(ids))).scalars())
        missing = [u for u in ids if u not in found]
        if missing:
            raise NotFound(f"users {missing} not found")
