"""User groups: named sets of users that roles can be assigned to (``det user-group``).

A membership change changes what the members may do, so it drops RbacService's cached
grants before returning. Deleting a group deletes its memberships and its role assignments.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa

from ... import names as _names
from ...errors import Conflict, InvalidRequest, NotFound
from ...store import groups as store
from ...store import reader
from ..access.rbac import RbacService
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
            row = store.group(conn, group_id)
            if row is None:
                raise NotFound(f"group {group_id} not found")
            members = store.members(conn, group_id)
        users = tuple(user_of_row(m) for m in members)
        return Group(row.id, row.name, len(users), users)

    def search(self, *, user_id: int | None = None, name: str | None = None, offset: int = 0,
               limit: int = 0) -> tuple[list[Group], int]:
        """Groups (with member counts) by exact ``name`` and/or that ``user_id`` belongs to;
        ``limit`` 0 means all."""
        if offset < 0 or limit < 0:
            raise InvalidRequest("offset and limit must not be negative")
        with self._reader.connect() as conn:
            rows, total = store.search(conn, user_id=user_id, group_name=name, offset=offset, limit=limit)
        return [Group(r.id, r.name, r.n) for r in rows], total

    def create(self, name: object, add_users: Iterable[int] = ()) -> Group:
        name = check_group_name(name)
        add_users = tuple(add_users)
        with self._engine.begin() as conn:
            self._check_name_free(conn, name)
            self._check_users(conn, add_users)
            group_id = store.insert(conn, name)
            store.add_members(conn, group_id, add_users)
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
        with self._engine.begin() as conn:
            current = store.name(conn, group_id)
            if current is None:
                raise NotFound(f"group {group_id} not found")
            if name is not None and name != current:
                self._check_name_free(conn, name)
                store.rename(conn, group_id, name)
            self._check_users(conn, add + remove)
            members = store.member_ids(conn, group_id)
            missing = [u for u in remove if u not in members]
            if missing:
                raise InvalidRequest(f"users {missing} are not members of group {current!r}")
            store.add_members(conn, group_id, [uid for uid in add if uid not in members])
            if remove:
                store.remove_members(conn, group_id, remove)
        self._rbac.invalidate()
        return self.get(group_id)

    def delete(self, group_id: int) -> None:
        with self._engine.begin() as conn:
            if not store.exists(conn, group_id):
                raise NotFound(f"group {group_id} not found")
            store.delete(conn, group_id)
        self._rbac.invalidate()

    @staticmethod
    def _check_name_free(conn: sa.Connection, name: str) -> None:
        if store.named(conn, name):
            raise Conflict(f"a group named {name!r} already exists")

    @staticmethod
    def _check_users(conn: sa.Connection, ids: Iterable[int]) -> None:
        ids = tuple(ids)
        if not ids:
            return
        found = store.existing_users(conn, ids)
        missing = [u for u in ids if u not in found]
        if missing:
            raise NotFound(f"users {missing} not found")
