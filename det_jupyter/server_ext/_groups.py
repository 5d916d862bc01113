"""/api/v1/groups: user groups (v1CreateGroupRequest, v1GetGroupsRequest, v1UpdateGroupRequest,
v1GroupDetails, v1GroupSearchResult). Managing needs ADMINISTRATE_USER; reading, any user."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest
from ..services.authz import Perm
from ..services.groups import Group, user_ids
from . import _serialize as ser
from ._base import DetHandler


def group_details(g: Group) -> dict[str, Any]:
    return {"groupId": g.id, "name": g.name, "users": [ser.user(u) for u in g.members]}


def _int(body: dict[str, Any], key: str, default: int | None = None) -> int | None:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidRequest(f"{key} must be an integer")
    return value


class GroupsHandler(DetHandler):
    permissions = {"POST": Perm.ADMINISTRATE_USER}

    def post(self) -> None:
        body = self.body_json()
        group = self.master.groups.create(body.get("name"), user_ids(body.get("addUsers"), "addUsers"))
        self.send({"group": group_details(group)})


class GroupSearchHandler(DetHandler):
    permissions = {"POST": Perm.AUTHENTICATED}

    def post(self) -> None:
        body = self.body_json()
        name = body.get("name")
        if name is not None and not isinstance(name, str):
            raise InvalidRequest("name must be a string")
        offset = _int(body, "offset", 0) or 0
        limit = _int(body, "limit", 0) or 0
        groups, total = self.master.groups.search(
            user_id=_int(body, "userId"), name=name or None, offset=offset, limit=limit)
        self.send({
            "groups": [{"group": {"groupId": g.id, "name": g.name}, "numMembers": g.num_members}
                       for g in groups],
            "pagination": ser.pagination(offset, limit, total, len(groups)),
        })


class GroupHandler(DetHandler):
    permissions = {"GET": Perm.AUTHENTICATED, "PUT": Perm.ADMINISTRATE_USER,
                   "DELETE": Perm.ADMINISTRATE_USER}

    def get(self, group_id: str) -> None:
        self.send({"group": group_details(self.master.groups.get(int(group_id)))})

    def put(self, group_id: str) -> None:
        body = self.body_json()
        if body.get("groupId") is not None and str(body["groupId"]).strip() != str(int(group_id)):
            raise InvalidRequest(f"groupId {body.get('groupId')!r} in the body does not match the "
                                 f"group {group_id} in the path")
        group = self.master.groups.update(
            int(group_id), name=body.get("name"),
            add_users=user_ids(body.get("addUsers"), "addUsers"),
            remove_users=user_ids(body.get("removeUsers"), "removeUsers"))
        self.send({"group": group_details(group)})

    def delete(self, group_id: str) -> None:
        self.master.groups.delete(int(group_id))
        self.send({})
