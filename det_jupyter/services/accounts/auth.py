"""Users, passwords, session tokens and the user tokens of tasks.

The stock client hashes passwords before sending them: ``sha512_hex(SALT + password)``
(``isHashed: true``). We treat that digest as the password and store it with scrypt and a
random salt, so the database never holds anything a client could replay. Tokens are random
32-byte strings; only their SHA-256 is stored (they carry enough entropy that a fast hash is
safe, and lookups stay an index probe).

A task gets a user token of its owner (``DET_USER_TOKEN``, what the stock client inside a task
logs in with): a ``user_sessions`` row of kind ``task`` that names its allocation, opened when
the allocation is placed and revoked in the transaction that ends it (``AllocationService``).
A master restart revokes every task token whose allocation is over (``revoke_task_sessions``
with no ids) in the transaction that ends the allocations the old master left running, so no
token outlives its task; the session lifespan is only a backstop.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ...errors import Conflict, Forbidden, InvalidRequest, Unauthenticated
from ...store import accounts as store
from ...store import reader
from ...store.accounts import TASK_KIND
from ..common.clock import Clock
from ..common.states import AllocState

CLIENT_SALT = "GubPEmmotfiK9TMD6Zdw"
SESSION_LIFESPAN_S = 30 * 24 * 3600
# A session token checked this recently is trusted from memory: a UI or a poll sends many
# requests a second, and on PostgreSQL each check is a few round trips. Logout forgets it at once.
SESSION_CACHE_S = 1.0
_SESSION_CACHE_MAX = 1024
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}


def client_hash(password: str) -> str:
    """What the stock client sends for ``password`` (``isHashed: true``)."""
    return hashlib.sha512((CLIENT_SALT + password).encode()).hexdigest()


def hash_password(client_digest: str) -> str:
    """A salted scrypt hash of a client digest, as stored."""
    salt = secrets.token_bytes(16)
    key = hashlib.scrypt(client_digest.encode(), salt=salt, dklen=32, **_SCRYPT)
    return "scrypt$" + base64.b64encode(salt).decode() + "$" + base64.b64encode(key).decode()


def verify_password(client_digest: str, stored: str) -> bool:
    try:
        scheme, salt_b64, key_b64 = stored.split("$")
    except ValueError:
        return False
    if scheme != "scrypt":
        return False
    key = hashlib.scrypt(
        client_digest.encode(), salt=base64.b64decode(salt_b64), dklen=32, **_SCRYPT
    )
    return hmac.compare_digest(key, base64.b64decode(key_b64))


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A random bearer token. Never one starting with ``-``: people pass tokens as command-line
    arguments (``det token login TOKEN``), where a leading dash reads as an option."""
    while True:
        token = secrets.token_urlsafe(32)
        if not token.startswith("-"):
            return token


def generate_password() -> str:
    """A random password that meets the usual policy (upper, lower, digit, >= 8 chars)."""
    while True:
        candidate = secrets.token_urlsafe(12)
        if (
            any(c.isupper() for c in candidate)
            and any(c.islower() for c in candidate)
            and any(c.isdigit() for c in candidate)
        ):
            return candidate


@dataclass(frozen=True)
class AgentUserGroup:
    """The host account a user's tasks run as (``det user link-with-agent-user``); the names
    are optional (the agent needs only the ids)."""

    uid: int
    gid: int
    user: str | None = None
    group: str | None = None

    def run_as(self) -> dict[str, Any]:
        """The TaskSpec's ``run_as`` (docs/internals.md)."""
        return {"uid": self.uid, "gid": self.gid, "user": self.user, "group": self.group}


@dataclass(frozen=True)
class User:
    id: int
    username: str
    admin: bool
    active: bool
    display_name: str | None = None
    modified_at: float = 0.0
    agent_user_group: AgentUserGroup | None = None


@dataclass(frozen=True)
class AllocationPrincipal:
    """A task authenticated by its allocation token: may touch only its own allocation."""

    allocation_id: str
    task_id: str
    trial_id: int | None
    experiment_id: int | None
    user: User


def link_of_row(row: Any) -> AgentUserGroup | None:
    """The agent user link in a user row of ``store.accounts`` (None: unlinked, or not read)."""
    uid = getattr(row, "agent_uid", None)
    if uid is None:
        return None
    return AgentUserGroup(uid, row.agent_gid, row.agent_user, row.agent_group)


def user_of_row(row: sa.Row) -> User:
    """A User from a row holding the users table's columns (and, read by ``store.accounts``
    with it, its agent user link)."""
    return User(
        id=row.id,
        username=row.username,
        admin=row.admin,
        active=row.active,
        display_name=row.display_name,
        modified_at=row.modified_at,
        agent_user_group=link_of_row(row),
    )


class AuthService:
    """Users and credentials. All methods are synchronous database work, except that
    ``user_for_token`` answers from memory for a token it checked in the last SESSION_CACHE_S
    seconds (still refusing it once expired); ``logout`` drops it from there first."""

    def __init__(self, engine: sa.Engine, clock: Clock, *,
                 on_user_created: Callable[..., None] | None = None,
                 on_user_changed: Callable[[], None] | None = None) -> None:
        """``on_user_created(conn, user_id, admin=bool)``: a new user's default roles, called in
        the creating transaction; ``on_user_changed()``: a change to a user that cached grants
        must not outlive."""
        self._engine = engine
        self._reader = reader(engine)  # read-only work: no transaction round trips
        self._clock = clock
        # token hash -> (monotonic time of the check, session expiry, user)
        self._checked: dict[str, tuple[float, float, User]] = {}
        # allocation id -> the hash of its task token, for tokens opened by this process
        self._task_tokens: dict[str, str] = {}
        self.on_user_created = on_user_created
        self.on_user_changed = on_user_changed

    def bootstrap(self, initial_password: str | None) -> str | None:
        """Create ``admin`` and ``determined`` on an empty database.

        Both get ``initial_password`` or, when that is empty, one generated password, which is
        returned so the caller can show it once. Returns None when the users already exist.
        """
        with self._engine.begin() as conn:
            if store.count_users(conn):
                return None
            password = initial_password or generate_password()
            now = self._clock.now()
            for name, admin in (("admin", True), ("determined", False)):
                store.insert_user(conn, username=name, password_hash=hash_password(client_hash(password)),
                                  admin=admin, active=True, created_at=now, modified_at=now)
            return password

    def login(self, username: str, password: str, is_hashed: bool) -> tuple[str, User]:
        """Check credentials and open a session. Bad credentials → Forbidden (as Determined)."""
        if not isinstance(username, str) or not username or len(username) > 255:
            raise Forbidden("invalid credentials")
        digest = password if is_hashed else client_hash(password or "")
        with self._engine.begin() as conn:
            row = store.user_by_name(conn, username)
            if row is None or not password or not verify_password(digest, row.password_hash):
                raise Forbidden("invalid credentials")
            if not row.active:
                raise Forbidden(f"user {username} is deactivated; ask an admin to reactivate it")
            return self._open_session(conn, row.id), user_of_row(row)

    def logout(self, token: str) -> None:
        """End a login session. An access token is left alone (``det token revoke`` ends it):
        logging out of a CLI that used ``det token login`` only forgets it there."""
        key = token_hash(token)
        self._checked.pop(key, None)
        with self._engine.begin() as conn:
            store.revoke_login_session(conn, key)

    def forget_user(self, user_id: int) -> None:
        """Drop every remembered token check of ``user_id``, so that the next request re-reads
        the database: call after deactivating the user, changing their password or admin flag,
        or revoking one of their sessions or tokens."""
        for key, hit in list(self._checked.items()):
            if hit[2].id == user_id:
                self._checked.pop(key, None)

    def user_for_token(self, token: str) -> User:
        """The active user a session token belongs to; Unauthenticated otherwise."""
        key = token_hash(token)
        hit = self._checked.get(key)
        if hit is not None and time.monotonic() - hit[0] < SESSION_CACHE_S and hit[1] >= self._clock.now():
            return hit[2]
        with self._reader.connect() as conn:
            row = store.session_user(conn, key)
        if row is None or row.revoked or row.expires_at < self._clock.now():
            raise Unauthenticated("invalid or expired token; log in again (det user login)")
        if not row.active:
            raise Unauthenticated("this user is deactivated")
        user = user_of_row(row)
        if len(self._checked) >= _SESSION_CACHE_MAX:
            self._checked.clear()
        self._checked[key] = (time.monotonic(), row.expires_at, user)
        return user

    def user_by_id(self, user_id: int) -> User:
        with self._reader.connect() as conn:
            row = store.user_by_id(conn, user_id)
        if row is None:
            raise InvalidRequest(f"no user with id {user_id}")
        return user_of_row(row)

    def user_by_name(self, username: str) -> User:
        with self._reader.connect() as conn:
            row = store.user_by_name(conn, username)
        if row is None:
            raise InvalidRequest(f"no user named {username!r}")
        return user_of_row(row)

    def list_users(self) -> list[User]:
        with self._reader.connect() as conn:
            return [user_of_row(r) for r in store.all_users(conn)]

    def ensure_user(self, username: str, *, admin: bool = False) -> User:
        """The user named ``username``, created (active, with a random password nobody
        knows) if there is none. An existing user is returned unchanged."""
        if not username or len(username) > 255:
            raise InvalidRequest(f"invalid user name {username!r}")
        with self._engine.begin() as conn:
            row = store.plain_user_by_name(conn, username)
            if row is None:
                now = self._clock.now()
                store.insert_user(conn, username=username, admin=admin, active=True, created_at=now,
                                  modified_at=now,
                                  password_hash=hash_password(client_hash(secrets.token_urlsafe(32))))
                row = store.plain_user_by_name(conn, username)
                assert row is not None  # just inserted, in this transaction
                if self.on_user_created is not None:
                    self.on_user_created(conn, row.id, admin=admin)
        return user_of_row(row)

    def session_for(self, username: str) -> str:
        """Open a session for a user without a password (the local operator, e.g. `up`)."""
        user = self.user_by_name(username)
        with self._engine.begin() as conn:
            return self._open_session(conn, user.id)

    # -- tasks' user tokens (DET_USER_TOKEN) ---------------------------------------------

    def open_task_sessions(
        self, conn: sa.Connection, allocation_ids: Sequence[str]
    ) -> dict[str, tuple[str, AgentUserGroup | None]]:
        """Each allocation's owner identity, in ``conn`` (the placement's transaction), by
        allocation id: a new user token of the owner (one per allocation, shared by the
        containers of its gang) and the owner's agent user link. An allocation without an
        owner gets neither."""
        if not allocation_ids:
            return {}
        now = self._clock.now()
        out, rows = {}, []
        for row in store.allocation_owners(conn, allocation_ids):
            if row.owner_id is None:
                continue
            token = new_token()
            out[row.allocation_id] = (token, link_of_row(row))
            rows.append({"user_id": row.owner_id, "token_hash": token_hash(token), "created_at": now,
                         "expires_at": now + SESSION_LIFESPAN_S, "revoked": False,
                         "kind": TASK_KIND, "allocation_id": row.allocation_id})
        if rows:
            store.insert_sessions(conn, rows)
            self._task_tokens.update((r["allocation_id"], r["token_hash"]) for r in rows)
        return out

    def revoke_task_sessions(self, conn: sa.Connection, allocation_ids: Sequence[str] | None) -> None:
        """Revoke the task tokens of ended allocations, in ``conn`` (the transaction that ends
        them); ``None``: of every allocation that is over or gone (after a master restart).
        Call ``forget_task_sessions`` once it committed."""
        if allocation_ids is not None and not allocation_ids:
            return
        store.revoke_task_sessions(conn, allocation_ids, ended_state=AllocState.TERMINATED.value)

    def forget_task_sessions(self, allocation_ids: Sequence[str]) -> None:
        """Drop the remembered checks of these allocations' task tokens (revoked), so the very
        next request with one is refused."""
        for allocation_id in allocation_ids:
            key = self._task_tokens.pop(allocation_id, None)
            if key is not None:
                self._checked.pop(key, None)

    def _open_session(self, conn: sa.Connection, user_id: int) -> str:
        token = new_token()
        now = self._clock.now()
        store.open_session(conn, user_id, token_hash(token), now, now + SESSION_LIFESPAN_S)
        return token

    def set_password(self, user_id: int, password: str) -> None:
        if len(password) < 8:
            raise Conflict("password must be at least 8 characters")
        with self._engine.begin() as conn:
            store.update_user(conn, user_id, password_hash=hash_password(client_hash(password)),
                              modified_at=self._clock.now())
