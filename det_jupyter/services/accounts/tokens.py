"""Access tokens (``det token create``): long-lived bearer credentials for automation.

They are rows of ``user_sessions`` with ``kind='access'``, so AuthService authenticates them
exactly like login sessions (``Authorization: Bearer``) and, like them, stores only their
SHA-256: the token itself is shown once, when it is created, and never again. A revoked or
expired token, or one whose user is deactivated, is refused on the very next request.

Users create, list and revoke their own tokens; another user's needs ADMINISTRATE_TOKENS
(ClusterAdmin), and without it another user's token does not exist (404).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlalchemy as sa

from ...errors import Conflict, Forbidden, InvalidRequest, NotFound
from ...store import accounts as store
from ...store import reader
from ..common.clock import Clock
from .auth import AuthService, User, new_token, token_hash

DAY_S = 24 * 3600
DEFAULT_LIFESPAN_S = 30 * DAY_S
MAX_LIFESPAN_S = 365 * DAY_S
MAX_DESCRIPTION = 1024
KIND = store.ACCESS_KIND

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
          "d": float(DAY_S)}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|ms|s|m|h|d)")


def parse_lifespan(text: object, *, default_s: float = DEFAULT_LIFESPAN_S,
                   max_s: float = MAX_LIFESPAN_S) -> float:
    """Seconds from a token lifespan: a Go duration (``720h``, ``1h30m``, ``90s``), days
    (``30d``, or a bare number of days), ``-1`` for the longest allowed, empty for the default.
    InvalidRequest names what is wrong."""
    if text is None or text == "":
        return default_s
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        text = str(text)
    if not isinstance(text, str):
        raise InvalidRequest("lifespan must be a string such as '30d' or '720h'")
    raw = text.strip()
    if raw == "-1":
        return max_s
    if re.fullmatch(r"\d+\.?\d*", raw):
        seconds = float(raw) * DAY_S
    elif raw and _PART.sub("", raw) == "":
        seconds = sum(float(n) * _UNITS[u] for n, u in _PART.findall(raw))
    else:
        raise InvalidRequest(f"lifespan {text!r} is not a duration; use e.g. '30d', '720h', "
                             f"'90m' or '-1' (the longest allowed, {max_s / DAY_S:g} days)")
    if seconds <= 0:
        raise InvalidRequest(f"lifespan {text!r} must be longer than zero")
    if seconds > max_s:
        raise InvalidRequest(f"lifespan {text!r} is longer than the maximum of {max_s / DAY_S:g} days")
    return seconds


@dataclass(frozen=True)
class TokenInfo:
    id: int
    user_id: int
    created_at: float
    expires_at: float
    revoked: bool
    description: str | None

    def active(self, now: float) -> bool:
        return not self.revoked and self.expires_at >= now


# sortBy -> the user_sessions column.
_SORT = {
    "": "id", "SORT_BY_UNSPECIFIED": "id", "SORT_BY_USER_ID": "user_id", "SORT_BY_EXPIRY": "expires_at",
    "SORT_BY_CREATED_AT": "created_at", "SORT_BY_TOKEN_TYPE": "kind", "SORT_BY_REVOKED": "revoked",
    "SORT_BY_DESCRIPTION": "description",
}


def _info(row: sa.Row) -> TokenInfo:
    return TokenInfo(id=row.id, user_id=row.user_id, created_at=row.created_at,
                     expires_at=row.expires_at, revoked=bool(row.revoked),
                     description=row.description)


def _description(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest("description must be a string")
    if len(value) > MAX_DESCRIPTION:
        raise InvalidRequest(f"description is {len(value)} characters long; at most "
                             f"{MAX_DESCRIPTION} are allowed")
    return value


class TokenService:
    def __init__(self, engine: sa.Engine, clock: Clock, auth: AuthService, *,
                 default_lifespan_s: float = DEFAULT_LIFESPAN_S,
                 max_lifespan_s: float = MAX_LIFESPAN_S) -> None:
        if not 0 < default_lifespan_s <= max_lifespan_s:
            raise ValueError(f"default token lifespan {default_lifespan_s} s must be > 0 and at "
                             f"most the maximum {max_lifespan_s} s")
        self._engine = engine
        self._reader = reader(engine)
        self._clock = clock
        self._auth = auth
        self.default_lifespan_s = default_lifespan_s
        self.max_lifespan_s = max_lifespan_s

    def create(self, *, actor: User, may_administrate: bool, user_id: int | None = None,
               lifespan: object = None, description: object = None) -> tuple[str, TokenInfo]:
        """A new access token for ``user_id`` (default: the actor); returns the token (shown
        this once) and its record."""
        user_id = actor.id if user_id is None else user_id
        if user_id != actor.id and not may_administrate:
            raise Forbidden("creating a token for another user needs the ADMINISTRATE_TOKENS "
                            "permission (ClusterAdmin)")
        seconds = parse_lifespan(lifespan, default_s=self.default_lifespan_s,
                                 max_s=self.max_lifespan_s)
        text = _description(description)
        token = new_token()
        now = self._clock.now()
        with self._engine.begin() as conn:
            user = store.name_and_active(conn, user_id)
            if user is None:
                raise NotFound(f"user {user_id} not found")
            if not user.active:
                raise Conflict(f"user {user.username} is deactivated; reactivate it first")
            token_id = store.insert_access_token(conn, user_id, token_hash(token), now, now + seconds, text)
        return token, TokenInfo(token_id, user_id, now, now + seconds, False, text)

    def list(self, *, actor: User, may_administrate: bool, username: str | None = None,
             token_ids: tuple[int, ...] = (), show_inactive: bool = False, sort_by: str = "",
             descending: bool = False, offset: int = 0,
             limit: int = 0) -> tuple[list[TokenInfo], int]:
        """Access tokens the actor may see (their own; everyone's with ADMINISTRATE_TOKENS).
        Revoked and expired ones only with ``show_inactive`` or when named in ``token_ids``."""
        if sort_by not in _SORT:
            raise InvalidRequest(f"sortBy {sort_by!r} is not supported; use one of "
                                 f"{', '.join(k for k in _SORT if k)}")
        if offset < 0 or limit < 0:
            raise InvalidRequest("offset and limit must not be negative")
        if username and not may_administrate and username != actor.username:
            raise Forbidden("listing another user's tokens needs the ADMINISTRATE_TOKENS "
                            "permission (ClusterAdmin)")
        live_at = None if token_ids or show_inactive else self._clock.now()
        with self._reader.connect() as conn:
            rows, total = store.access_tokens_page(
                conn, user_id=None if may_administrate else actor.id, owner=username, ids=token_ids,
                live_at=live_at, sort=_SORT[sort_by], descending=descending, offset=offset, limit=limit)
        return [_info(r) for r in rows], total

    def get(self, token_id: int, *, actor: User, may_administrate: bool) -> TokenInfo:
        with self._reader.connect() as conn:
            row = store.access_token(conn, token_id)
        if row is None or (row.user_id != actor.id and not may_administrate):
            raise NotFound(f"access token {token_id} not found")
        return _info(row)

    def patch(self, token_id: int, *, actor: User, may_administrate: bool,
              description: object = None, revoke: bool = False) -> TokenInfo:
        """Change the description and/or revoke (a revoked token stays revoked)."""
        info = self.get(token_id, actor=actor, may_administrate=may_administrate)
        values: dict[str, object] = {}
        if description is not None:
            values["description"] = _description(description)
        if revoke:
            values["revoked"] = True
        if values:
            with self._engine.begin() as conn:
                store.update_token(conn, token_id, **values)
        if revoke:
            self._auth.forget_user(info.user_id)
        return self.get(token_id, actor=actor, may_administrate=may_administrate)
