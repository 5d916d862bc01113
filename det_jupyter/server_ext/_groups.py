"""/api/v1/groups: user groups (v1CreateGroupRequest, v1GetGroupsRequest, v1UpdateGroupRequest,
v1GroupDetails, v1GroupSearchResult). Managing needs ADMINISTRATE_USER; reading, any user."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest
from ..services.access.authz import Perm
from ..services.accounts.groups import Group, user_ids
from . import _serialize as ser
from ._api import api, array, echo, int64, integer, name, obj, string
from ._base import DetHandler

_GROUP_NAME = name(255)
_USER_IDS = array(integer(), 1000)


def group_details(g: Group) -> dict[str, Any]:
    return {"groupId": g.id, "name": g.name, "users": [ser.user(u) for u in g.members]}


def _int(body: dict[str, Any], key: str, default: int | None = None) -> int | None:
    value = body.get(key)
    return default if value is None else value


class GroupsHandler(DetHandler):
    permissions = {"POST": Perm.ADMINISTRATE_USER}

    @api(body=obj(("name",), name=_GROUP_NAME, addUsers=_USER_IDS), body_required=True, errors=(409,))
    def post(self) -> None:
        body = self.body_json()
        group = self.master.groups.create(body.get("name"), user_ids(body.get("addUsers"), "addUsers"))
        self.send({"group": group_details(group)})


class GroupSearchHandler(DetHandler):
    permissions = {"POST": Perm.AUTHENTICATED}

    @api(body=obj(name=string(), offset=integer(0), limit=integer(0), userId=integer()))
    def post(self) -> None:
        body = self.body_json()
        name = body.get("name")
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

    @api()
    def get(self, group_id: str) -> None:
        self.send({"group": group_details(self.master.groups.get(int(group_id)))})

    @api(body=obj(groupId=echo(int64(), "group_id"), name=_GROUP_NAME, addUsers=_USER_IDS,
                  removeUsers=_USER_IDS), errors=(409,))
    def put(self, group_id: str) -> None:
        body = self.body_json()
        if body.get("groupId") is not None and int(body["groupId"]) != int(group_id):
            raise InvalidRequest(f"groupId {body.get('groupId')!r} in the body does not match the "
                                 f"group {group_id} in the path")
        group = self.master.groups.update(
            int(group_id), name=body.get("name"),
            add_users=user_ids(body.get("addUsers"), "addUsers"),
            remove_users=user_ids(body.get("removeUsers"), "removeUsers"))
        self.send({"group": group_details(group)})

    @api()
    def delete(self, group_id: str) -> None:
        self.master.groups.delete(int(group_id))
        self.send({})
