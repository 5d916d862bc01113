"""Task config policies: ``/api/v1/config-policies/global/{type}`` and
``/api/v1/config-policies/workspaces/{id}/{type}`` (``det config-policies set|describe|delete``).
Global ones: admins; a workspace's: its administrators to change, its viewers to read."""

from __future__ import annotations

from ..errors import InvalidRequest
from ..services.access.authz import Perm
from ..services.cluster.config_policies import GLOBAL, WORKLOAD_TYPES
from ._api import api, obj, string
from ._base import DetHandler

#: the path's workload type, as 0.38.1 names them (another is a 400 that lists these)
_PATH = {"workload": {"type": "string", "enum": list(WORKLOAD_TYPES)}}

_BODY = obj(
    ("configPolicies",),
    configPolicies=string(max_length=1 << 20),
    workloadType=string(max_length=16),
)


def _type(raw: str) -> str:
    if raw not in WORKLOAD_TYPES:
        raise InvalidRequest(f"workloadType {raw[:32]!r} is not one of {', '.join(WORKLOAD_TYPES)}")
    return raw


class GlobalConfigPoliciesHandler(DetHandler):
    permissions = {
        "GET": Perm.AUTHENTICATED,
        "PUT": Perm.EDIT_MASTER_CONFIG,
        "DELETE": Perm.EDIT_MASTER_CONFIG,
    }

    @api(path=_PATH)
    def get(self, workload: str) -> None:
        self.send({"configPolicies": self.master.config_policies.get(GLOBAL, _type(workload))})

    @api(body=_BODY, body_required=True, path=_PATH)
    def put(self, workload: str) -> None:
        policy = self.master.config_policies.put(
            GLOBAL, _type(workload), self.body_json()["configPolicies"], self.user.id
        )
        self.send({"configPolicies": policy})

    @api(path=_PATH)
    def delete(self, workload: str) -> None:
        self.master.config_policies.delete(GLOBAL, _type(workload))
        self.send({})


class WorkspaceConfigPoliciesHandler(DetHandler):
    permissions = {
        "GET": Perm.VIEW_WORKSPACE,
        "PUT": Perm.UPDATE_WORKSPACE,
        "DELETE": Perm.UPDATE_WORKSPACE,
    }

    @api(errors=(404,), path=_PATH)
    def get(self, ws_id: str, workload: str) -> None:
        self.authorize_workspace(int(ws_id))
        self.send({"configPolicies": self.master.config_policies.get(int(ws_id), _type(workload))})

    @api(body=_BODY, body_required=True, errors=(404,), path=_PATH)
    def put(self, ws_id: str, workload: str) -> None:
        self.authorize_workspace(int(ws_id))
        policy = self.master.config_policies.put(
            int(ws_id), _type(workload), self.body_json()["configPolicies"], self.user.id
        )
        self.send({"configPolicies": policy})

    @api(errors=(404,), path=_PATH)
    def delete(self, ws_id: str, workload: str) -> None:
        self.authorize_workspace(int(ws_id))
        self.master.config_policies.delete(int(ws_id), _type(workload))
        self.send({})
