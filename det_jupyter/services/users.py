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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import sqlalchemy as sa

from ..errors import Conflict, Forbidden, InvalidRequest, NotFound
from ..store import reader
from ..store import tables as t
from ._clock import Clock
from .auth import AuthService, User, client_hash, hash_password, token_hash, user_of_row
from .rbac import UNCATEGORIZED, RbacService

BUILTIN_ADMIN = "admin"
MAX_NAME = 128

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
    if not isinstance(name, str) or not name.strip():
        raise InvalidRequest("username must be a non-empty string")
    if len(name) > MAX_NAME:
        raise InvalidRequest(f"username is {len(name)} characters long; at most {MAX_NAME} are allowed")
    if any(c.isspace() or c == "/" or not c.isprintable() for c in name):
        raise InvalidRequest(f"username {name!r} may not contain spaces, '/' or control characters")
    return name


def check_display_name(name: object) -> str:
    if not isinstance(name, str):
        raise InvalidRequest("displayName must be a string")
    if len(name) > MAX_NAME:
        raise InvalidRequest(f"displayName is {len(name)} characters long; at most {MAX_NAME} are allowed")
    return name


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

    # What users may change about themselves; everything else needs ADMINISTRATE_USER.
    SELF_SERVICE = frozenset({"display_name", "password", "is_hashed"})
    WIRE = {"username": "username", "display_name": "displayName", "active": "active",
            "admin": "admin", "password": "password"}

    def admin_only(self) -> list[str]:
        """The wire names of the fields set here that only an admin may change."""
        return [self.WIRE[f.name] for f in fields(self)
                if f.name not in self.SELF_SERVICE and getattr(self, f.name) is not None]

    def is_empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self) if f.name != "is_hashed")


def revoke_sessions(conn: sa.Connection, user_id: int, *, keep_token: str | None = None) -> None:
    """Revoke the user's login sessions (not access tokens), except ``keep_token``'s."""
    s = t.user_sessions.c
    q = sa.update(t.user_sessions).where(s.user_id == user_id, s.kind == "session", s.revoked.is_(False))
    if keep_token:
        q = q.where(s.token_hash != token_hash(keep_token))
    conn.execute(q.values(revoked=True))


_SORT = {
    "SORT_BY_USER_NAME": t.users.c.username, "SORT_BY_NAME": t.users.c.username,
    "SORT_BY_DISPLAY_NAME": t.users.c.display_name, "SORT_BY_ADMIN": t.users.c.admin,
    "SORT_BY_ACTIVE": t.users.c.active, "SORT_BY_MODIFIED_TIME": t.users.c.modified_at,
    "SORT_BY_UNSPECIFIED": t.users.c.id, "": t.users.c.id,
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
            row = conn.execute(sa.select(t.users).where(t.users.c.id == user_id)).first()
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
        u = t.users.c
        where = []
        if active is not None:
            where.append(u.active.is_(active))
        if admin is not None:
            where.append(u.admin.is_(admin))
        if name:
            pattern = f"%{name.lower()}%"
            where.append(sa.or_(sa.func.lower(u.username).like(pattern),
                                sa.func.lower(sa.func.coalesce(u.display_name, "")).like(pattern)))
        col = _SORT[sort_by]
        q = sa.select(t.users).where(*where).order_by(col.desc() if descending else col.asc(), u.id)
        if limit:
            q = q.limit(limit)
        with self._reader.connect() as conn:
            total = conn.execute(sa.select(sa.func.count()).select_from(t.users).where(*where)).scalar_one()
            rows = conn.execute(q.offset(offset)).all()
        return [user_of_row(r) for r in rows], total

    # -- writes ----------------------------------------------------------------------------

    def create(self, username: object, *, password: object, is_hashed: bool = False,
               admin: bool = False, active: bool = True, display_name: object = None) -> User:
        """A new user with the default role (ClusterAdmin when ``admin``)."""
        username = check_username(username)
        shown = None if display_name in (None, "") else check_display_name(display_name)
        pw_hash = stored_password(password, is_hashed)
        now = self._clock.now()
        with self._engine.begin() as conn:
            if conn.execute(sa.select(t.users.c.id).where(t.users.c.username == username)).first():
                raise Conflict(f"a user named {username!r} already exists")
            user_id = conn.execute(sa.insert(t.users).values(
                username=username, password_hash=pw_hash, admin=admin, active=active,
                display_name=shown, created_at=now, modified_at=now)).inserted_primary_key[0]
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
            raise InvalidRequest("nothing to change: send displayName, password, username, active "
                                 "or admin")
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
            if "username" in values and conn.execute(
                    sa.select(t.users.c.id).where(t.users.c.username == values["username"])).first():
                raise Conflict(f"a user named {values['username']!r} already exists")
            conn.execute(sa.update(t.users).where(t.users.c.id == user_id)
                         .values(**values, modified_at=self._clock.now()))
            if patch.password is not None:
                revoke_sessions(conn, user_id, keep_token=keep_token if actor.id == user_id else None)
            if patch.active is False:
                revoke_sessions(conn, user_id)
            if patch.admin and not target.admin:
                self._rbac.assign(conn, "ClusterAdmin", user_id=user_id)
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
