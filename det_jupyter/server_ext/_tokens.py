"""/api/v1/tokens: access tokens (v1PostAccessTokenRequest, v1TokenInfo, v1PatchAccessTokenRequest).

Token values are returned once, by the create call; lists and reads carry only metadata.
``GET /api/v1/tokens/{id}`` is ours (0.38.1 describes with ``GET /api/v1/tokens?tokenIds=``).
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest
from ..services.authz import Perm
from ..services.tokens import TokenInfo
from . import _serialize as ser
from ._base import DetHandler


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

    def get(self) -> None:
        offset = self.int_arg("offset", 0) or 0
        limit = self.int_arg("limit", 0) or 0
        ids = []
        for raw in self.get_query_arguments("tokenIds"):
            try:
                ids.append(int(raw))
            except ValueError:
                raise InvalidRequest(f"tokenIds must be integers, got {raw!r}") from None
        infos, total = self.master.tokens.list(
            actor=self.user, may_administrate=_may(self),
            username=self.get_query_argument("username", None) or None, token_ids=tuple(ids),
            show_inactive=self.bool_arg("showInactive"),
            sort_by=self.get_query_argument("sortBy", "") or "",
            descending=self.get_query_argument("orderBy", "") == "ORDER_BY_DESC",
            offset=offset, limit=limit)
        self.send({"tokenInfo": [token_info(i) for i in infos],
                   "pagination": ser.pagination(offset, limit, total, len(infos))})

    def post(self) -> None:
        body = self.body_json()
        user_id = body.get("userId")
        if user_id is not None and (not isinstance(user_id, int) or isinstance(user_id, bool)):
            raise InvalidRequest("userId must be an integer (a user's id)")
        token, info = self.master.tokens.create(
            actor=self.user, may_administrate=_may(self), user_id=user_id,
            lifespan=body.get("lifespan"), description=body.get("description"))
        self.send({"token": token, "tokenId": info.id})


class TokenHandler(DetHandler):
    permissions = {"GET": Perm.AUTHENTICATED, "PATCH": Perm.AUTHENTICATED}

    def get(self, token_id: str) -> None:
        info = self.master.tokens.get(int(token_id), actor=self.user, may_administrate=_may(self))
        self.send({"tokenInfo": token_info(info)})

    def patch(self, token_id: str) -> None:
        body = self.body_json()
        revoke = body.get("setRevoked")
        if revoke is not None and not isinstance(revoke, bool):
            raise InvalidRequest("setRevoked must be a boolean")
        # 0.38.1's `det token revoke` sends the id as a string.
        if body.get("tokenId") is not None and str(body["tokenId"]).strip() != str(int(token_id)):
            raise InvalidRequest(f"tokenId {body.get('tokenId')!r} in the body does not match "
                                 f"the token {token_id} in the path")
        info = self.master.tokens.patch(
            int(token_id), actor=self.user, may_administrate=_may(self),
            description=body.get("description"), revoke=bool(revoke))
        self.send({"tokenInfo": token_info(info)})
