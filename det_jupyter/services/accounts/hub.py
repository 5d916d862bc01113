"""JupyterHub's users as det users: a token the hub issued (a user's API token, a single-user
server's token) is verified by asking the hub who owns it (``GET {hub_api}/user``), and its
owner is the det user of the same name, made on first use; a hub admin is made a
ClusterAdmin when first seen. (Hub groups are read but not yet carried over to det groups.)

The master holds the hub's service token (``JUPYTERHUB_API_TOKEN``) to read a user's admin flag
and groups where the user's own token may not (a server token's scopes are narrow). Answers are
cached for ``CACHE_S`` seconds by the token's hash; a token the hub refuses is cached as refused
for as long, so a client retrying a bad token does not make the master ask the hub each time.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from ...errors import Unauthenticated, Unavailable
from .auth import AuthService, User, token_hash

log = logging.getLogger(__name__)

CACHE_S = 60.0
CACHE_MAX = 10_000
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class HubUser:
    name: str
    admin: bool
    groups: tuple[str, ...]


class HubAuth:
    """Verifies hub tokens (``user_for_token``) for the REST API's authentication."""

    def __init__(self, api_url: str, service_token: str, auth: AuthService, *,
                 on_hub_user: Callable[[User, HubUser], None] | None = None) -> None:
        self.api_url = api_url.rstrip("/")
        self._service_token = service_token
        self._auth = auth
        self._on_hub_user = on_hub_user  # admin and groups carried over (RBAC)
        self._cache: dict[str, tuple[float, User | None]] = {}

    async def user_for_token(self, token: str) -> User:
        """The det user of the hub user owning ``token``; Unauthenticated when the hub does
        not know the token (or it is a service's), Unavailable when the hub cannot be reached."""
        key = token_hash(token)
        hit = self._cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < CACHE_S:
            if hit[1] is None:
                raise Unauthenticated("invalid or expired token; log in again (det user login, or through JupyterHub)")
            return hit[1]
        model = await self._get("/user", token)
        if model is None or model.get("kind", "user") != "user" or not isinstance(model.get("name"), str):
            self._remember(key, None)
            raise Unauthenticated("invalid or expired token; log in again (det user login, or through JupyterHub)")
        hub_user = await self._hub_user(model)
        user = self._auth.ensure_user(hub_user.name, admin=hub_user.admin)
        if not user.active:
            raise Unauthenticated("this user is deactivated")
        if self._on_hub_user is not None:
            self._on_hub_user(user, hub_user)
        self._remember(key, user)
        return user

    async def _hub_user(self, model: dict[str, Any]) -> HubUser:
        name = model["name"]
        if "admin" not in model or "groups" not in model:  # a narrow token: ask as the service
            full = await self._get(f"/users/{urllib.parse.quote(name, safe='')}", self._service_token)
            if full is not None:
                model = {**full, **{k: v for k, v in model.items() if k in ("admin", "groups")}}
        groups = model.get("groups")
        return HubUser(name, bool(model.get("admin")),
                       tuple(str(g) for g in groups) if isinstance(groups, list) else ())

    async def _get(self, path: str, token: str) -> dict[str, Any] | None:
        """The hub's JSON answer, None for a 401/403/404; Unavailable when it cannot be asked."""
        request = HTTPRequest(self.api_url + path, headers={"Authorization": f"token {token}"},
                              request_timeout=TIMEOUT_S, connect_timeout=TIMEOUT_S)
        try:
            resp = await AsyncHTTPClient().fetch(request)
        except HTTPClientError as e:
            if e.code in (401, 403, 404):
                return None
            raise Unavailable(f"JupyterHub at {self.api_url} answered {e.code} verifying a token; "
                              "try again, or check the hub") from None
        except OSError as e:
            raise Unavailable(f"cannot reach JupyterHub at {self.api_url} to verify a token ({e}); "
                              "check --hub-api-url and that the hub is up") from None
        try:
            body = json.loads(resp.body)
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    def _remember(self, key: str, user: User | None) -> None:
        if len(self._cache) >= CACHE_MAX:
            self._cache.clear()
        self._cache[key] = (time.monotonic(), user)
