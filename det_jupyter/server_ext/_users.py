"""/api/v1/users: list, create, get, patch, set password (v1PostUserRequest, v1PatchUser)."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest
from ..services.access.authz import Perm
from ..services.accounts.users import MAX_ID as MAX_HOST_ID
from ..services.accounts.users import UserPatch, parse_agent_user_group
from . import _serialize as ser
from ._api import (
    BOOL,
    ORDER_BY,
    Q,
    api,
    integer,
    obj,
    password,
    service_checked,
    string,
    text,
    username,
)
from ._base import DetHandler, _bearer
from ._json import checked_json

_ACCOUNT = "^[A-Za-z_][A-Za-z0-9_.-]{0,31}$"
# A uid or gid: 0 to 2**31 - 1, as a number or as ASCII digits (int64-style; str.strip()'s
# ASCII whitespace around them is dropped).
_UNDER_2_31 = ("(?:[0-9]{1,9}|1[0-9]{9}|20[0-9]{8}|21[0-3][0-9]{7}|214[0-6][0-9]{6}|2147[0-3][0-9]{5}|"
               "21474[0-7][0-9]{4}|214748[0-2][0-9]{3}|2147483[0-5][0-9]{2}|21474836[0-3][0-9]|214748364[0-7])")
_WS = "[\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f ]*"
_HOST_ID = {"anyOf": [integer(0, MAX_HOST_ID - 1), {"type": "string", "pattern": f"^{_WS}0*{_UNDER_2_31}{_WS}$"}]}
_EMPTY = {"enum": [None, ""], "nullable": True}
#: ``v1AgentUserGroup``: uid and gid, and optionally the names; every field empty unlinks.
AGENT_USER_GROUP = service_checked({
    "type": "object", "additionalProperties": False,
    "properties": {"agentUid": {}, "agentGid": {},
                   "agentUser": {"anyOf": [{"type": "string", "pattern": _ACCOUNT}, _EMPTY]},
                   "agentGroup": {"anyOf": [{"type": "string", "pattern": _ACCOUNT}, _EMPTY]}},
    "anyOf": [{"required": ["agentUid", "agentGid"], "properties": {"agentUid": _HOST_ID, "agentGid": _HOST_ID}},
              {"properties": {k: _EMPTY for k in ("agentUid", "agentGid", "agentUser", "agentGroup")}}],
})
#: Remote (SSO) users are not supported: ``remote`` may only be false.
_NOT_REMOTE = {"type": "boolean", "enum": [False]}


def _password_rule(*, required: bool) -> list[dict[str, Any]]:
    """``password`` under ``isHashed``: a client digest (any non-empty string) when true, a
    plain password under the policy otherwise."""
    need = ["password"] if required else []
    return [service_checked(branch) for branch in (
        {"required": ["isHashed", *need], "properties": {"isHashed": {"type": "boolean", "enum": [True]},
                                                          "password": string(min_length=1, nullable=not required)}},
        {**({"required": need} if need else {}),  # OpenAPI 3.0: ``required`` is never empty
         "properties": {"isHashed": {"type": "boolean", "enum": [False, None], "nullable": True},
                        "password": {**password(), "nullable": not required}}},
    )]


def _stripped_ids(raw: Any) -> Any:
    """``agentUid``/``agentGid`` strings without the whitespace around them (``str.strip()``'s,
    as ``_HOST_ID`` allows): ``int()`` refuses some of it (U+001C to U+001F), which the service
    would read as a bug rather than a number."""
    if not isinstance(raw, dict):
        return raw
    return {k: v.strip() if k in ("agentUid", "agentGid") and isinstance(v, str) else v for k, v in raw.items()}


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
        link = parse_agent_user_group(_stripped_ids(body["agentUserGroup"]))
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
    """A boolean query parameter that may be left out (None)."""
    raw = handler.get_query_argument(name, None)
    return None if raw in (None, "") else handler.bool_arg(name)


_USER_SORT = ("SORT_BY_UNSPECIFIED", "SORT_BY_USER_NAME", "SORT_BY_NAME", "SORT_BY_DISPLAY_NAME",
              "SORT_BY_ADMIN", "SORT_BY_ACTIVE", "SORT_BY_MODIFIED_TIME")


class UsersHandler(DetHandler):
    """Every authenticated user may list users (as in Determined); creating needs
    ADMINISTRATE_USER."""

    permissions = {"GET": Perm.AUTHENTICATED, "POST": Perm.ADMINISTRATE_USER}

    @api(query=[Q("offset", "integer", minimum=0), Q("limit", "integer", minimum=0),
                Q("active", "boolean"), Q("admin", "boolean"), Q("name"),
                Q("sortBy", enum=_USER_SORT), Q("orderBy", enum=ORDER_BY)])
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

    @api(body={**obj(("user",), user=obj(
        ("username",), username=username(), admin=BOOL, active=BOOL, displayName=text(128),
        remote=_NOT_REMOTE, agentUserGroup=AGENT_USER_GROUP), password=string(), isHashed=BOOL),
        "anyOf": _password_rule(required=True)}, body_required=True, errors=(409,))
    def post(self) -> None:
        body = self.body_json()
        spec = body["user"]
        if spec.get("remote"):
            raise InvalidRequest("remote (SSO) users are not supported by det-jupyter; leave "
                                 "remote out")
        link = None
        if spec.get("agentUserGroup") is not None:
            link = parse_agent_user_group(_stripped_ids(spec["agentUserGroup"]))
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

    @api()
    def get(self, user_id: str) -> None:
        self.send({"user": ser.user(self.master.users.get(int(user_id)))})

    @api(body={**obj(username=username(), displayName=text(128), active=BOOL, admin=BOOL,
                     password=string(), isHashed=BOOL, remote=_NOT_REMOTE, agentUserGroup=AGENT_USER_GROUP),
               "anyOf": _password_rule(required=False)}, errors=(409,))
    def patch(self, user_id: str) -> None:
        """``v1PatchUser``; a patch that changes nothing answers the user as it is."""
        patch = parse_patch(self.body_json())
        if patch.is_empty():
            self.send({"user": ser.user(self.master.users.get(int(user_id)))})
            return
        user = self.master.users.patch(
            int(user_id), patch, actor=self.user,
            may_administrate=self.grants.can(Perm.ADMINISTRATE_USER), keep_token=_own_token(self))
        self.send({"user": ser.user(user)})


class UserPasswordHandler(DetHandler):
    """``POST /api/v1/users/{id}/password`` with the new plain password as a JSON string
    (what the stock bindings send); the password policy applies."""

    permissions = {"POST": Perm.AUTHENTICATED}

    @api(body={"anyOf": [password(), obj(("password",), password=password())]}, body_required=True)
    def post(self, user_id: str) -> None:
        raw = bytes(self.request.body or b"")
        if not raw:
            raise InvalidRequest("the body must be the new password as a JSON string")
        password = checked_json(raw)
        self.spec.check_body(password)
        if isinstance(password, dict):  # {"password": ...} is accepted too
            password = password.get("password")
        user = self.master.users.set_password(
            int(user_id), password, actor=self.user,
            may_administrate=self.grants.can(Perm.ADMINISTRATE_USER), keep_token=_own_token(self))
        self.send({"user": ser.user(user)})
