"""/api/v1/users: list, create, get, patch, set password (v1PostUserRequest, v1PatchUser)."""

from __future__ import annotations

import json
from typing import Any

from ..errors import InvalidRequest
from ..services.authz import Perm
from ..services.users import UserPatch, parse_agent_user_group
from . import _serialize as ser
from ._base import DetHandler, _bearer


def _opt(body: dict[str, Any], key: str, kind: type) -> Any:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise InvalidRequest(f"{key} must be a {'boolean' if kind is bool else 'string'}")
    return value


def parse_patch(body: dict[str, Any]) -> UserPatch:
    """A ``v1PatchUser`` body. Fields we cannot honour are refused, not ignored; an
    ``agentUserGroup`` with every field empty removes the link."""
    if body.get("remote") not in (None, False):
        raise InvalidRequest("remote is not supported by det-jupyter (no SSO); leave it out")
    link = unlink = None
    if body.get("agentUserGroup") is not None:
        link = parse_agent_user_group(body["agentUserGroup"])
        unlink = True if link is None else None
    return UserPatch(
        username=_opt(body, "username", str), display_name=_opt(body, "displayName", str),
        active=_opt(body, "active", bool), admin=_opt(body, "admin", bool),
        password=_opt(body, "password", str), is_hashed=bool(_opt(body, "isHashed", bool)),
        agent_user_group=link, unlink_agent_user=unlink,
    )


def _own_token(handler: DetHandler) -> str | None:
    """The caller's session token: it survives the caller's own password change."""
    return _bearer(handler.request.headers.get("Authorization"))


def _tri(handler: DetHandler, name: str) -> bool | None:
    raw = handler.get_query_argument(name, None)
    if raw in (None, ""):
        return None
    if raw.lower() not in ("true", "false", "1", "0"):
        raise InvalidRequest(f"query parameter {name} must be true or false, got {raw!r}")
    return raw.lower() in ("true", "1")


class UsersHandler(DetHandler):
    """Every authenticated user may list users (as in Determined); creating needs
    ADMINISTRATE_USER."""

    permissions = {"GET": Perm.AUTHENTICATED, "POST": Perm.ADMINISTRATE_USER}

    def get(self) -> None:
        offset = self.int_arg("offset", 0) or 0
        limit = self.int_arg("limit", 0) or 0
        users, total = self.master.users.list(
            active=_tri(self, "active"), admin=_tri(self, "admin"),
            name=self.get_query_argument("name", None) or None,
            sort_by=self.get_query_argument("sortBy", "") or "",
            descending=self.get_query_argument("orderBy", "") == "ORDER_BY_DESC",
            offset=offset, limit=limit)
        self.send({"users": [ser.user(u) for u in users],
                   "pagination": ser.pagination(offset, limit, total, len(users))})

    def post(self) -> None:
        body = self.body_json()
        spec = body.get("user")
        if not isinstance(spec, dict):
            raise InvalidRequest("user must be an object: {username, admin, active, displayName}")
        if spec.get("remote"):
            raise InvalidRequest("remote (SSO) users are not supported by det-jupyter; leave "
                                 "remote out")
        link = None
        if spec.get("agentUserGroup") is not None:
            link = parse_agent_user_group(spec["agentUserGroup"])
        admin = _opt(spec, "admin", bool)
        active = _opt(spec, "active", bool)
        user = self.master.users.create(
            spec.get("username"), password=body.get("password"),
            is_hashed=bool(_opt(body, "isHashed", bool)), admin=bool(admin),
            active=True if active is None else active, display_name=spec.get("displayName"),
            agent_user_group=link)
        self.send({"user": ser.user(user)})


class UserHandler(DetHandler):
    """One user: anyone authenticated may read; users may change their own display name and
    password, an admin (ADMINISTRATE_USER) anything (the service decides)."""

    permissions = {"GET": Perm.AUTHENTICATED, "PATCH": Perm.AUTHENTICATED}

    def get(self, user_id: str) -> None:
        self.send({"user": ser.user(self.master.users.get(int(user_id)))})

    def patch(self, user_id: str) -> None:
        user = self.master.users.patch(
            int(user_id), parse_patch(self.body_json()), actor=self.user,
            may_administrate=self.grants.can(Perm.ADMINISTRATE_USER), keep_token=_own_token(self))
        self.send({"user": ser.user(user)})


class UserPasswordHandler(DetHandler):
    """``POST /api/v1/users/{id}/password`` with the new plain password as a JSON string
    (what the stock bindings send); the password policy applies."""

    permissions = {"POST": Perm.AUTHENTICATED}

    def post(self, user_id: str) -> None:
        try:
            password = json.loads(self.request.body or b"null")
        except (ValueError, UnicodeDecodeError):
            raise InvalidRequest("the body must be the new password as a JSON string") from None
        if isinstance(password, dict):  # {"password": ...} is accepted too
            password = password.get("password")
        user = self.master.users.set_password(
            int(user_id), password, actor=self.user,
            may_administrate=self.grants.can(Perm.ADMINISTRATE_USER), keep_token=_own_token(self))
        self.send({"user": ser.user(user)})
