"""JupyterHub's users as det users: a token the hub issued (a user's API token, a single-user
server's token) is verified by asking the hub who owns it (``GET {hub_api}/user``), and its
owner is the det user of the same name, made on first use. Each time the hub is asked, its
answer is carried over (``HubSync``): a hub admin is a ClusterAdmin (and stops being one when
the hub takes admin away, where the hub gave it), and the user's hub groups are det groups of
the same name, whose members the hub sets.

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

import sqlalchemy as sa
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from ...errors import Unauthenticated, Unavailable
from ...store import hub_users as hub_store
from ..access.rbac import RbacService
from .auth import AuthService, User, token_hash

log = logging.getLogger(__name__)

CACHE_S = 60.0
CACHE_MAX = 10_000
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class HubOAuth:
    """The master as the hub's OAuth client, for browser sign-in: its client id (the hub
    service's, ``service-<name>``), the hub's URL as browsers reach it, and the callback URL the
    service registered (``oauth_redirect_uri``; empty: made from the request's host)."""

    client_id: str
    public_url: str
    callback_url: str = ""


@dataclass(frozen=True)
class HubUser:
    name: str
    admin: bool
    groups: tuple[str, ...]


class HubAuth:
    """Verifies hub tokens (``user_for_token``) for the REST API's authentication."""

    def __init__(self, api_url: str, service_token: str, auth: AuthService, *,
                 on_hub_user: Callable[[User, HubUser], User] | None = None,
                 oauth: HubOAuth | None = None) -> None:
        self.api_url = api_url.rstrip("/")
        self.oauth = oauth or HubOAuth("service-det-master", self.api_url.removesuffix("/hub/api"))
        self._service_token = service_token
        self._auth = auth
        self._on_hub_user = on_hub_user  # admin and groups carried over (HubSync)
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
        user = await self.user_for_model(model)
        self._remember(key, user)
        return user

    async def user_for_model(self, model: dict[str, Any]) -> User:
        """The det user of a hub user's model (``GET /hub/api/user``), with the hub's admin
        flag and groups carried over."""
        hub_user = await self._hub_user(model)
        user = self._auth.ensure_user(hub_user.name)
        if not user.active:
            raise Unauthenticated("this user is deactivated")
        if self._on_hub_user is not None:
            user = self._on_hub_user(user, hub_user)
        return user

    def authorize_url(self, redirect_uri: str, state: str) -> str:
        """Where a browser signs in at the hub and is sent back to ``redirect_uri``."""
        query = urllib.parse.urlencode({"client_id": self.oauth.client_id, "redirect_uri": redirect_uri,
                                        "response_type": "code", "state": state})
        return f"{self.oauth.public_url.rstrip('/')}/hub/api/oauth2/authorize?{query}"

    async def user_for_code(self, code: str, redirect_uri: str) -> User:
        """The det user of the hub user who signed in and was sent back with ``code``: the
        code is traded for a token (the service token is the client's secret), whose owner
        the hub names."""
        form = urllib.parse.urlencode({
            "client_id": self.oauth.client_id, "client_secret": self._service_token, "code": code,
            "grant_type": "authorization_code", "redirect_uri": redirect_uri})
        request = HTTPRequest(self.api_url + "/oauth2/token", method="POST", body=form,
                              headers={"Content-Type": "application/x-www-form-urlencoded"},
                              request_timeout=TIMEOUT_S, connect_timeout=TIMEOUT_S)
        try:
            resp = await AsyncHTTPClient().fetch(request)
            token = json.loads(resp.body).get("access_token")
        except HTTPClientError as e:
            raise Unauthenticated(f"JupyterHub refused the sign-in ({e.code}); sign in again") from None
        except (OSError, ValueError, AttributeError) as e:
            raise Unavailable(f"cannot reach JupyterHub at {self.api_url} to finish the sign-in ({e}); "
                              "try again, or check the hub") from None
        if not isinstance(token, str) or not token:
            raise Unauthenticated("JupyterHub gave no token for the sign-in; sign in again")
        model = await self._get("/user", token)
        if model is None or model.get("kind", "user") != "user" or not isinstance(model.get("name"), str):
            raise Unauthenticated("JupyterHub does not say who signed in; sign in again")
        return await self.user_for_model(model)

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


class HubSync:
    """Carries a hub user's admin flag and groups into det (``store.hub_users``), in one
    transaction; the caches of roles and token checks are dropped when anything changed."""

    def __init__(self, engine: sa.Engine, auth: AuthService, rbac: RbacService) -> None:
        self._engine = engine
        self._auth = auth
        self._rbac = rbac

    def __call__(self, user: User, hub_user: HubUser) -> User:
        groups = [g for g in hub_user.groups if 0 < len(g) <= 255]
        with self._engine.begin() as conn:
            changed = hub_store.sync_admin(conn, user.id, hub_user.admin)
            changed = hub_store.sync_groups(conn, user.id, groups) or changed
        if not changed:
            return user
        log.info("det-jupyter: JupyterHub user %r: admin %s, groups %s", user.username, hub_user.admin, groups)
        self._rbac.invalidate()
        self._auth.forget_user(user.id)
        return self._auth.user_by_name(user.username)
