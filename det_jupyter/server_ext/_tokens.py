"""/api/v1/tokens: access tokens (v1PostAccessTokenRequest, v1TokenInfo, v1PatchAccessTokenRequest).

Token values are returned once, by the create call; lists and reads carry only metadata.
``GET /api/v1/tokens/{id}`` is ours (0.38.1 describes with ``GET /api/v1/tokens?tokenIds=``).
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest
from ..services.access.authz import Perm
from ..services.accounts.tokens import TokenInfo
from . import _serialize as ser
from ._api import BOOL, ORDER_BY, Q, api, echo, int64, obj, string
from ._base import DetHandler

_TOKEN_SORT = ("SORT_BY_UNSPECIFIED", "SORT_BY_USER_ID", "SORT_BY_EXPIRY", "SORT_BY_CREATED_AT",
               "SORT_BY_TOKEN_TYPE", "SORT_BY_REVOKED", "SORT_BY_DESCRIPTION")
#: What the document promises to take: -1 (the longest allowed), or whole days or hours up to a
#: year. The service also takes any Go duration ("1h30m") and a bare number of days.
LIFESPAN = string(32, description="a duration: 30d, 720h, 90m, 1s, or -1 for the longest allowed "
                                  "(365 days); Go durations such as 1h30m are taken too")


def token_info(info: TokenInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "userId": info.user_id,
        "createdAt": ser.ts(info.created_at),
        "expiry": ser.ts(info.expires_at),
        "revoked": info.revoked,
        "description": info.description or "",
        "tokenType": "TOKEN_TYPE_ACCESS_TOKEN",
    }


def _may(handler: DetHandler) -> bool:
    return handler.grants.can(Perm.ADMINISTRATE_TOKENS)


class TokensHandler(DetHandler):
    """Anyone authenticated manages their own tokens; another user's needs
    ADMINISTRATE_TOKENS (checked by the service)."""

    permissions = {"GET": Perm.AUTHENTICATED, "POST": Perm.AUTHENTICATED}

    @api(query=[Q("offset", "integer", minimum=0), Q("limit", "integer", minimum=0),
                Q("tokenIds", "integer", many=True, minimum=0), Q("username"), Q("showInactive", "boolean"),
                Q("sortBy", enum=_TOKEN_SORT), Q("orderBy", enum=ORDER_BY)])
    def get(self) -> None:
        offset = self.int_arg("offset", 0) or 0
        limit = self.int_arg("limit", 0) or 0
        ids = [int(raw) for raw in self.get_query_arguments("tokenIds") if raw]
        infos, total = self.master.tokens.list(
            actor=self.user, may_administrate=_may(self),
            username=self.get_query_argument("username", None) or None, token_ids=tuple(ids),
            show_inactive=self.bool_arg("showInactive"),
            sort_by=self.get_query_argument("sortBy", "") or "",
            descending=self.get_query_argument("orderBy", "") == "ORDER_BY_DESC",
            offset=offset, limit=limit)
        self.send({"tokenInfo": [token_info(i) for i in infos],
                   "pagination": ser.pagination(offset, limit, total, len(infos))})

    @api(body=obj(userId=int64(), lifespan=LIFESPAN, description=string(1024)), errors=(409,))
    def post(self) -> None:
        body = self.body_json()
        user_id = body.get("userId")
        if isinstance(user_id, str):
            user_id = int(user_id)
        token, info = self.master.tokens.create(
            actor=self.user, may_administrate=_may(self), user_id=user_id,
            lifespan=body.get("lifespan"), description=body.get("description"))
        self.send({"token": token, "tokenId": info.id})


class TokenHandler(DetHandler):
    permissions = {"GET": Perm.AUTHENTICATED, "PATCH": Perm.AUTHENTICATED}

    @api()
    def get(self, token_id: str) -> None:
        info = self.master.tokens.get(int(token_id), actor=self.user, may_administrate=_may(self))
        self.send({"tokenInfo": token_info(info)})

    @api(body=obj(tokenId=echo(int64(), "token_id"), setRevoked=BOOL, description=string(1024)))
    def patch(self, token_id: str) -> None:
        body = self.body_json()
        revoke = body.get("setRevoked")
        # 0.38.1's `det token revoke` sends the id as a string.
        if body.get("tokenId") is not None and int(body["tokenId"]) != int(token_id):
            raise InvalidRequest(f"tokenId {body.get('tokenId')!r} in the body does not match "
                                 f"the token {token_id} in the path")
        info = self.master.tokens.patch(
            int(token_id), actor=self.user, may_administrate=_may(self),
            description=body.get("description"), revoke=bool(revoke))
        self.send({"tokenInfo": token_info(info)})
