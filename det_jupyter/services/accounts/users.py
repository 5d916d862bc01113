"""User administration: create, rename, (de)activate, passwords and the admin flag.

AuthService keeps credentials and sessions; the policy of who may change what lives here.
Every change that could alter what a user may do, or whether their credentials still work,
drops the in-memory caches before it returns (AuthService's token checks for that user,
RbacService's grants), so the very next request sees it — there is no cache window.

What a change does to credentials:

* deactivation: the user's login sessions are revoked and their access tokens are refused
  while they stay inactive (they work again after reactivation); their experiments, tasks and
  models stay.
* a password change: every other login session of the user is revoked (the caller's own is
  kept when users change their own password); access tokens are separate credentials and
  stay until revoked or expired.

Linking a user with an agent user (``agentUserGroup``: the uid/gid, and optionally the names,
their tasks run as on agents) needs ADMINISTRATE_USER, for oneself too, as in Determined: it
decides which host files a user's code may touch. Tasks placed afterwards run as the link.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import sqlalchemy as sa

from ... import names as _names
from ...errors import Conflict, Forbidden, InvalidRequest, NotFound
from ...store import accounts as store
from ...store import reader
from ..access.rbac import UNCATEGORIZED, RbacService
from ..common.clock import Clock
from .auth import (
    AgentUserGroup,
    AuthService,
    User,
    client_hash,
    hash_password,
    token_hash,
    user_of_row,
)

BUILTIN_ADMIN = "admin"
MAX_NAME = 128
MAX_ID = 2**31  # uids and gids are below this (what the agent's kernel and Determined accept)
# A POSIX account name: the portable filename characters, starting with a letter or '_' (so
# never an option nor a number), at most 32 characters, as useradd and groupadd take them.
_ACCOUNT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
_LINK_FIELDS = {"agentUid": "uid", "agentGid": "gid", "agentUser": "user", "agentGroup": "group"}

# (test, what the password must have): checked in this order, the first failure is reported.
PASSWORD_RULES: tuple[tuple[Callable[[str], bool], str], ...] = (
    (lambda p: len(p) >= 8, "at least 8 characters"),
    (lambda p: any(c.isupper() for c in p), "an upper-case letter"),
    (lambda p: any(c.islower() for c in p), "a lower-case letter"),
    (lambda p: any(c.isdigit() for c in p), "a digit"),
)
POLICY_TEXT = "at least 8 characters, with an upper-case letter, a lower-case letter and a digit"


def password_problem(password: str) -> str | None:
    """The first rule of the password policy that ``password`` breaks, or None."""
    for ok, rule in PASSWORD_RULES:
        if not ok(password):
            return rule
    return None


def check_password(password: object) -> str:
    """``password`` if it is a string that meets the policy; InvalidRequest naming the rule."""
    if not isinstance(password, str) or not password:
        raise InvalidRequest(f"a password is required ({POLICY_TEXT})")
    problem = password_problem(password)
    if problem is not None:
        raise InvalidRequest(f"the password must have {problem} (policy: {POLICY_TEXT})")
    return password


def check_username(name: object) -> str:
    """A username: ``_names.check_name``'s rules, and no whitespace at all (it is typed on
    command lines and in ``det -u``), at most ``MAX_NAME`` characters."""
    name = _names.check_name("username", name, max_len=MAX_NAME)
    space = next((c for c in name if c.isspace()), None)
    if space is not None:
        raise InvalidRequest(f"the username {_names.visible(name)!r} contains "
                             f"{_names.describe(space)}; usernames have no spaces")
    return name


def _host_id(raw: dict[str, Any], key: str) -> int:
    value = raw.get(key)
    if value is None:
        raise InvalidRequest(f"agentUserGroup.{key} is required (an integer from 0 to {MAX_ID - 1})")
    if isinstance(value, str) and value.isascii() and value.strip().isdigit():  # int64-style strings
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_ID:
        raise InvalidRequest(f"agentUserGroup.{key} must be an integer from 0 to {MAX_ID - 1}, "
                             f"got {value!r}")
    return value


def _account_name(raw: dict[str, Any], key: str) -> str | None:
    value = raw.get(key)
    if value in (None, ""):
        return None
    if not isinstance(value, str) or not _ACCOUNT_NAME.fullmatch(value):
        raise InvalidRequest(f"agentUserGroup.{key} must be a POSIX account name (letters, digits, "
                             f"'_', '.', '-', starting with a letter or '_', at most 32 characters), "
                             f"got {value!r}")
    return value


def parse_agent_user_group(raw: object) -> AgentUserGroup | None:
    """A ``v1AgentUserGroup``: the link it asks for, or None for one with every field empty
    (remove the link). uid and gid are required; the names may be left out."""
    if not isinstance(raw, dict):
        raise InvalidRequest("agentUserGroup must be an object {agentUid, agentGid, agentUser, "
                             "agentGroup}")
    unknown = sorted(set(raw) - set(_LINK_FIELDS))
    if unknown:
        raise InvalidRequest(f"agentUserGroup has unknown fields {', '.join(unknown)}; "
                             f"use {', '.join(_LINK_FIELDS)}")
    if all(raw.get(k) in (None, "") for k in _LINK_FIELDS):
        return None
    return AgentUserGroup(uid=_host_id(raw, "agentUid"), gid=_host_id(raw, "agentGid"),
                          user=_account_name(raw, "agentUser"), group=_account_name(raw, "agentGroup"))


def set_link(conn: sa.Connection, user_id: int, link: AgentUserGroup | None) -> None:
    """Link ``user_id`` with an agent user (None: unlink), in ``conn``."""
    store.set_link(conn, user_id, None if link is None else (link.uid, link.gid, link.user, link.group))


def check_display_name(name: object) -> str:
    """A display name: free text on one line (spaces and '/' allowed, not control or
    invisible characters), at most ``MAX_NAME`` characters; "" clears it."""
    return _names.check_text("displayName", name, max_len=MAX_NAME)


def stored_password(password: object, is_hashed: bool) -> str:
    """What goes in ``users.password_hash``. A plain password must meet the policy; a client
    digest (``isHashed``, what the stock client sends) cannot be checked here — the stock
    client checks the policy itself before hashing."""
    if is_hashed:
        if not isinstance(password, str) or not password:
            raise InvalidRequest(f"a password is required ({POLICY_TEXT})")
        return hash_password(password)
    return hash_password(client_hash(check_password(password)))


@dataclass(frozen=True)
class UserPatch:
    """The fields of a ``v1PatchUser`` we act on; None = leave unchanged."""

    username: str | None = None
    display_name: str | None = None
    active: bool | None = None
    admin: bool | None = None
    password: str | None = None
    is_hashed: bool = False
    agent_user_group: AgentUserGroup | None = None
    unlink_agent_user: bool | None = None  # True: remove the agent user link

    # What users may change about themselves; everything else needs ADMINISTRATE_USER.
    SELF_SERVICE = frozenset({"display_name", "password", "is_hashed"})
    WIRE = {"username": "username", "display_name": "displayName", "active": "active",
            "admin": "admin", "password": "password", "agent_user_group": "agentUserGroup",
            "unlink_agent_user": "agentUserGroup"}

    def admin_only(self) -> list[str]:
        """The wire names of the fields set here that only an admin may change."""
        return list(dict.fromkeys(self.WIRE[f.name] for f in fields(self)
                                  if f.name not in self.SELF_SERVICE and getattr(self, f.name) is not None))

    def is_empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self) if f.name != "is_hashed")


def revoke_sessions(conn: sa.Connection, user_id: int, *, keep_token: str | None = None) -> None:
    """Revoke the user's login sessions (not access tokens), except ``keep_token``'s."""
    store.revoke_login_sessions(conn, user_id, keep=token_hash(keep_token) if keep_token else None)


# sortBy -> the users column.
_SORT = {
    "SORT_BY_USER_NAME": "username", "SORT_BY_NAME": "username", "SORT_BY_DISPLAY_NAME": "display_name",
    "SORT_BY_ADMIN": "admin", "SORT_BY_ACTIVE": "active", "SORT_BY_MODIFIED_TIME": "modified_at",
    "SORT_BY_UNSPECIFIED": "id", "": "id",
}


class UserService:
    def __init__(self, engine: sa.Engine, clock: Clock, auth: AuthService, rbac: RbacService) -> None:
        self._engine = engine
        self._reader = reader(engine)
        self._clock = clock
        self._auth = auth
        self._rbac = rbac

    # -- reads -----------------------------------------------------------------------------

    def get(self, user_id: int) -> User:
        with self._reader.connect() as conn:
            row = store.user_by_id(conn, user_id)
        if row is None:
            raise NotFound(f"user {user_id} not found")
        return user_of_row(row)

    def list(self, *, active: bool | None = None, admin: bool | None = None, name: str | None = None,
             sort_by: str = "", descending: bool = False, offset: int = 0,
             limit: int = 0) -> tuple[list[User], int]:
        """A page of users and the total that match. ``name`` matches user or display names
        (substring, any case); ``limit`` 0 means all."""
        if sort_by not in _SORT:
            raise InvalidRequest(f"sortBy {sort_by!r} is not supported; use one of "
                                 f"{', '.join(k for k in _SORT if k)}")
        if offset < 0 or limit < 0:
            raise InvalidRequest("offset and limit must not be negative")
        with self._reader.connect() as conn:
            rows, total = store.users_page(conn, active=active, admin=admin, name=name, sort=_SORT[sort_by],
                                           descending=descending, offset=offset, limit=limit)
        return [user_of_row(r) for r in rows], total

    # -- writes ----------------------------------------------------------------------------

    def create(self, username: object, *, password: object, is_hashed: bool = False,
               admin: bool = False, active: bool = True, display_name: object = None,
               agent_user_group: AgentUserGroup | None = None) -> User:
        """A new user with the default role (ClusterAdmin when ``admin``), linked with
        ``agent_user_group`` where given."""
        username = check_username(username)
        shown = None if display_name in (None, "") else check_display_name(display_name)
        pw_hash = stored_password(password, is_hashed)
        now = self._clock.now()
        with self._engine.begin() as conn:
            if store.user_id_by_name(conn, username) is not None:
                raise Conflict(f"a user named {username!r} already exists")
            user_id = store.insert_user(conn, username=username, password_hash=pw_hash, admin=admin, active=active,
                                        display_name=shown, created_at=now, modified_at=now)
            if agent_user_group is not None:
                set_link(conn, user_id, agent_user_group)
            if self._auth.on_user_created is not None:
                self._auth.on_user_created(conn, user_id, admin=admin)
        self._changed(user_id)
        return self.get(user_id)

    def patch(self, user_id: int, patch: UserPatch, *, actor: User, may_administrate: bool,
              keep_token: str | None = None) -> User:
        """Apply ``patch`` as ``actor``. Users may change their own display name and password;
        the rest (and anyone else) needs ADMINISTRATE_USER. ``keep_token`` (the caller's own
        session) survives the caller's own password change."""
        target = self.get(user_id)
        if not may_administrate:
            if actor.id != user_id:
                raise Forbidden("changing another user needs the ADMINISTRATE_USER permission "
                                "(ClusterAdmin); you may change only your own display name and password")
            refused = patch.admin_only()
            if refused:
                raise Forbidden(f"you may not change your own {', '.join(refused)}; ask an admin "
                                "(ADMINISTRATE_USER)")
        if patch.is_empty():
            raise InvalidRequest("nothing to change: send displayName, password, username, active, "
                                 "admin or agentUserGroup")
        if target.username == BUILTIN_ADMIN:
            if patch.active is False or patch.admin is False:
                raise Conflict("the built-in admin cannot be deactivated or lose admin")
            if patch.username not in (None, BUILTIN_ADMIN):
                raise Conflict("the built-in admin cannot be renamed")
        values: dict[str, object] = {}
        if patch.username is not None and patch.username != target.username:
            values["username"] = check_username(patch.username)
        if patch.display_name is not None:
            values["display_name"] = check_display_name(patch.display_name) or None
        if patch.active is not None:
            values["active"] = patch.active
        if patch.password is not None:
            values["password_hash"] = stored_password(patch.password, patch.is_hashed)
        with self._engine.begin() as conn:
            if "username" in values and store.user_id_by_name(conn, str(values["username"])) is not None:
                raise Conflict(f"a user named {values['username']!r} already exists")
            store.update_user(conn, user_id, **values, modified_at=self._clock.now())
            if patch.password is not None:
                revoke_sessions(conn, user_id, keep_token=keep_token if actor.id == user_id else None)
            if patch.active is False:
                revoke_sessions(conn, user_id)
            if patch.admin and not target.admin:
                self._rbac.assign(conn, "ClusterAdmin", user_id=user_id)
            if patch.agent_user_group is not None or patch.unlink_agent_user:
                set_link(conn, user_id, patch.agent_user_group)
        if patch.admin is False and target.admin:
            self._demote(user_id)
        self._changed(user_id)
        return self.get(user_id)

    def set_password(self, user_id: int, password: object, *, actor: User, may_administrate: bool,
                     keep_token: str | None = None) -> User:
        """A new plain password (the policy applies), for oneself or, as an admin, anyone."""
        if not isinstance(password, str):
            raise InvalidRequest("the body must be the new password as a JSON string")
        return self.patch(user_id, UserPatch(password=password), actor=actor,
                          may_administrate=may_administrate, keep_token=keep_token)

    def _demote(self, user_id: int) -> None:
        """Take ClusterAdmin away; a user left with no role at all gets the default role, as a
        new non-admin user would."""
        self._rbac.unassign("ClusterAdmin", user_id=user_id)
        if self._rbac.default_role and not self._rbac.assignments(user_id=user_id):
            self._rbac.assign(None, self._rbac.default_role, user_id=user_id,
                              workspace_id=UNCATEGORIZED)

    def _changed(self, user_id: int) -> None:
        self._auth.forget_user(user_id)
        if self._auth.on_user_changed is not None:
            self._auth.on_user_changed()
