"""Users, user groups and access tokens (``det user``, ``det user-group``, ``det token``):
functions over a ``Determined`` session.

Passwords travel as typed (the master checks its password policy on them and hashes them); a
new access token is returned once, by ``create_token``, and never again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._errors import InvalidInput

# -- users --------------------------------------------------------------------------------


def list_users(d: Any, *, active: bool | None = None) -> list[dict[str, Any]]:
    """Every user (``v1User``), or only the active (``active=True``) or inactive ones."""
    params = {} if active is None else {"active": str(active).lower()}
    return d._session.get("/api/v1/users", **params).get("users") or []


def get_user(d: Any, username: str) -> dict[str, Any]:
    return d._session.get(f"/api/v1/users/{username}/by-username")["user"]


def create_user(d: Any, username: str, password: str, *, admin: bool = False,
                display_name: str | None = None) -> dict[str, Any]:
    user: dict[str, Any] = {"username": username, "admin": admin, "active": True}
    if display_name:
        user["displayName"] = display_name
    return d._session.post("/api/v1/users", {"user": user, "password": password,
                                             "isHashed": False})["user"]


def patch_user(d: Any, target: str, /, **changes: Any) -> dict[str, Any]:
    """Change user ``target``'s ``displayName``, ``username`` (a rename), ``active``, ``admin``
    or ``password`` (wire names)."""
    allowed = {"displayName", "username", "active", "admin", "password"}
    unknown = set(changes) - allowed
    if unknown:
        raise InvalidInput(f"cannot change {', '.join(sorted(unknown))}; "
                           f"fields are {', '.join(sorted(allowed))}")
    if not changes:
        raise InvalidInput("nothing to change")
    user_id = get_user(d, target)["id"]
    return d._session.request("PATCH", f"/api/v1/users/{user_id}", changes)["user"]


def set_password(d: Any, username: str, password: str) -> dict[str, Any]:
    user_id = get_user(d, username)["id"]
    return d._session.request("POST", f"/api/v1/users/{user_id}/password", password)["user"]


def user_ids(d: Any, usernames: Sequence[str]) -> list[int]:
    by_name = {u["username"]: u["id"] for u in list_users(d)}
    missing = [n for n in usernames if n not in by_name]
    if missing:
        raise InvalidInput(f"no user named {', '.join(missing)}; see det user list --all")
    return [by_name[n] for n in usernames]


# -- groups -------------------------------------------------------------------------------


def search_groups(d: Any, *, name: str | None = None, user_id: int | None = None,
                  offset: int = 0, limit: int = 0) -> list[dict[str, Any]]:
    """``v1GroupSearchResult`` list: ``{"group": {groupId, name}, "numMembers"}``."""
    body: dict[str, Any] = {"offset": offset, "limit": limit}
    if name:
        body["name"] = name
    if user_id is not None:
        body["userId"] = user_id
    return d._session.post("/api/v1/groups/search", body).get("groups") or []


def group_id(d: Any, name: str) -> int:
    found = search_groups(d, name=name, limit=1)
    if not found:
        raise InvalidInput(f"no user group named {name!r}; see det user-group list")
    return int(found[0]["group"]["groupId"])


def get_group(d: Any, name: str) -> dict[str, Any]:
    """``v1GroupDetails``: groupId, name, users."""
    return d._session.get(f"/api/v1/groups/{group_id(d, name)}")["group"]


def create_group(d: Any, name: str, members: Sequence[str] = ()) -> dict[str, Any]:
    return d._session.post("/api/v1/groups", {"name": name,
                                              "addUsers": user_ids(d, list(members))})["group"]


def update_group(d: Any, name: str, *, new_name: str | None = None, add: Sequence[str] = (),
                 remove: Sequence[str] = ()) -> dict[str, Any]:
    gid = group_id(d, name)
    body: dict[str, Any] = {"groupId": gid}
    if new_name:
        body["name"] = new_name
    if add:
        body["addUsers"] = user_ids(d, list(add))
    if remove:
        body["removeUsers"] = user_ids(d, list(remove))
    return d._session.request("PUT", f"/api/v1/groups/{gid}", body)["group"]


def delete_group(d: Any, name: str) -> int:
    gid = group_id(d, name)
    d._session.request("DELETE", f"/api/v1/groups/{gid}")
    return gid


# -- access tokens ------------------------------------------------------------------------


def create_token(d: Any, *, username: str | None = None, lifespan: str | None = None,
                 description: str | None = None) -> dict[str, Any]:
    """A new access token: ``{"token", "tokenId"}`` (the token is shown only now)."""
    body: dict[str, Any] = {}
    if username:
        body["userId"] = get_user(d, username)["id"]
    if lifespan:
        body["lifespan"] = lifespan
    if description is not None:
        body["description"] = description
    return d._session.post("/api/v1/tokens", body)


def list_tokens(d: Any, *, username: str | None = None, show_inactive: bool = False,
                token_ids: Sequence[int] = ()) -> list[dict[str, Any]]:
    """``v1TokenInfo`` records (never the token values)."""
    params: dict[str, Any] = {}
    if username:
        params["username"] = username
    if show_inactive:
        params["showInactive"] = "true"
    if token_ids:
        params["tokenIds"] = list(token_ids)
    return d._session.get("/api/v1/tokens", **params).get("tokenInfo") or []


def patch_token(d: Any, token_id: int, *, description: str | None = None,
                revoke: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"tokenId": token_id, "setRevoked": revoke}
    if description is not None:
        body["description"] = description
    return d._session.request("PATCH", f"/api/v1/tokens/{token_id}", body)["tokenInfo"]
