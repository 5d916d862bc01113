"""Users, passwords, session tokens and allocation tokens.

The stock client hashes passwords before sending them: ``sha512_hex(SALT + password)``
(``isHashed: true``). We treat that digest as the password and store it with scrypt and a
random salt, so the database never holds anything a client could replay. Tokens are random
32-byte strings; only their SHA-256 is stored (they carry enough entropy that a fast hash is
safe, and lookups stay an index probe).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa

from ..errors import Conflict, Forbidden, InvalidRequest, Unauthenticated
from ..store import reader
from ..store import tables as t
from ._clock import Clock

CLIENT_SALT = "GubPEmmotfiK9TMD6Zdw"
SESSION_LIFESPAN_S = 30 * 24 * 3600
# A session token checked this recently is trusted from memory: a UI or a poll sends many
# requests a second, and on PostgreSQL each check is a few round trips. Logout forgets it at once.
SESSION_CACHE_S = 1.0
_SESSION_CACHE_MAX = 1024
# The per-request lookups, built once (building a statement and its cache key per call cost
# more than running it on SQLite).
_SESSION_USER = (sa.select(t.users, t.user_sessions.c.expires_at, t.user_sessions.c.revoked)
                 .join(t.user_sessions, t.user_sessions.c.user_id == t.users.c.id)
                 .where(t.user_sessions.c.token_hash == sa.bindparam("key")))
_USER_BY_ID = sa.select(t.users).where(t.users.c.id == sa.bindparam("target"))
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
class User:
    id: int
    username: str
    admin: bool
    active: bool
    display_name: str | None = None
    modified_at: float = 0.0


@dataclass(frozen=True)
class AllocationPrincipal:
    """A task authenticated by its allocation token: may touch only its own allocation."""

    allocation_id: str
    task_id: str
    trial_id: int | None
    experiment_id: int | None
    user: User


def user_of_row(row: sa.Row) -> User:
    """A User from a row holding the users table's columns."""
    return User(
        id=row.id,
        username=row.username,
        admin=row.admin,
        active=row.active,
        display_name=row.display_name,
        modified_at=row.modified_at,
    )


class AuthService:
    """Users and credentials. All methods are synchronous database work, except that
    ``user_for_token`` answers from memory for a token it checked in the last SESSION_CACHE_S
    seconds (still refusing it once expired); ``logout`` drops it from there first."""

    def __init__(self, engine: sa.Engine, clock: Clock) -> None:
        self._engine = engine
        self._reader = reader(engine)  # read-only work: no transaction round trips
        self._clock = clock
        # token hash -> (monotonic time of the check, session expiry, user)
        self._checked: dict[str, tuple[float, float, User]] = {}
        # Set by the master: a new user's default roles (called in the creating transaction),
        # and a change to a user that cached grants must not outlive.
        self.on_user_created: Callable[..., None] | None = None  # (conn, user_id, admin=bool)
        self.on_user_changed: Callable[[], None] | None = None

    def bootstrap(self, initial_password: str | None) -> str | None:
        """Create ``admin`` and ``determined`` on an empty database.

        Both get ``initial_password`` or, when that is empty, one generated password, which is
        returned so the caller can show it once. Returns None when the users already exist.
        """
        with self._engine.begin() as conn:
            if conn.execute(sa.select(sa.func.count()).select_from(t.users)).scalar_one():
                return None
            password = initial_password or generate_password()
            now = self._clock.now()
            for name, admin in (("admin", True), ("determined", False)):
                conn.execute(
                    sa.insert(t.users).values(
                        username=name,
                        password_hash=hash_password(client_hash(password)),
                        admin=admin,
                        active=True,
                        created_at=now,
                        modified_at=now,
                    )
                )
            return password

    def login(self, username: str, password: str, is_hashed: bool) -> tuple[str, User]:
        """Check credentials and open a session. Bad credentials → Forbidden (as Determined)."""
        if not isinstance(username, str) or not username or len(username) > 255:
            raise Forbidden("invalid credentials")
        digest = password if is_hashed else client_hash(password or "")
        with self._engine.begin() as conn:
            row = conn.execute(sa.select(t.users).where(t.users.c.username == username)).first()
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
            conn.execute(
                sa.update(t.user_sessions)
                .where(t.user_sessions.c.token_hash == key, t.user_sessions.c.kind == "session")
                .values(revoked=True)
            )

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
            row = conn.execute(_SESSION_USER, {"key": key}).first()
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
            row = conn.execute(_USER_BY_ID, {"target": user_id}).first()
        if row is None:
            raise InvalidRequest(f"no user with id {user_id}")
        return user_of_row(row)

    def user_by_name(self, username: str) -> User:
        with self._reader.connect() as conn:
            row = conn.execute(sa.select(t.users).where(t.users.c.username == username)).first()
        if row is None:
            raise InvalidRequest(f"no user named {username!r}")
        return user_of_row(row)

    def list_users(self) -> list[User]:
        with self._reader.connect() as conn:
            return [user_of_row(r) for r in conn.execute(sa.select(t.users).order_by(t.users.c.id))]

    def ensure_user(self, username: str, *, admin: bool = False) -> User:
        """The user named ``username``, created (active, with a random password nobody
        knows) if there is none. An existing user is returned unchanged."""
        if not username or len(username) > 255:
            raise InvalidRequest(f"invalid user name {username!r}")
        with self._engine.begin() as conn:
            row = conn.execute(sa.select(t.users).where(t.users.c.username == username)).first()
            if row is None:
                now = self._clock.now()
                conn.execute(sa.insert(t.users).values(
                    username=username, admin=admin, active=True, created_at=now, modified_at=now,
                    password_hash=hash_password(client_hash(secrets.token_urlsafe(32)))))
                row = conn.execute(sa.select(t.users).where(t.users.c.username == username)).one()
                if self.on_user_created is not None:
                    self.on_user_created(conn, row.id, admin=admin)
        return user_of_row(row)

    def session_for(self, username: str) -> str:
        """Open a session for a user without a password (the local operator, e.g. `up`)."""
        user = self.user_by_name(username)
        with self._engine.begin() as conn:
            return self._open_session(conn, user.id)

    def _open_session(self, conn: sa.Connection, user_id: int) -> str:
        token = new_token()
        now = self._clock.now()
        conn.execute(
            sa.insert(t.user_sessions).values(
                user_id=user_id,
                token_hash=token_hash(token),
                created_at=now,
                expires_at=now + SESSION_LIFESPAN_S,
                revoked=False,
            )
        )
        return token

    def set_password(self, user_id: int, password: str) -> None:
        if len(password) < 8:
            raise Conflict("password must be at least 8 characters")
        with self._engine.begin() as conn:
            conn.execute(
                sa.update(t.users)
                .where(t.users.c.id == user_id)
                .values(password_hash=hash_password(client_hash(password)), modified_at=self._clock.now())
            )
