"""Resource-pool-to-workspace bindings: ``/api/v1/resource-pools/{name}/workspace-bindings``
(``det resource-pool bindings add|remove|replace|list-workspaces``) and
``/api/v1/workspaces/{id}/available-resource-pools`` (``det workspace list-pools``)."""

from __future__ import annotations

from ..services.access.authz import Perm
from . import _serialize as ser
from ._api import MAX_ID, Q, api, array, integer, obj, string
from ._base import DetHandler

_BODY = obj(
    ("resourcePoolName",),
    resourcePoolName=string(max_length=255),
    workspaceIds=array(integer(minimum=1, maximum=MAX_ID), max_items=1000),
    workspaceNames=array(string(max_length=255), max_items=1000),
)
_PAGE = [Q("offset", "integer", minimum=0), Q("limit", "integer", minimum=0)]


def _page(handler: DetHandler, items: list, key: str) -> dict:
    offset, limit = handler.int_arg("offset", 0) or 0, handler.int_arg("limit", 0) or 0
    shown = items[offset : offset + limit] if limit else items[offset:]
    return {key: shown, "pagination": ser.pagination(offset, limit, len(items), len(shown))}


class PoolBindingsHandler(DetHandler):
    """Admins change a pool's bindings (0.38.1: the cluster-admin permission); anyone signed
    in lists them."""

    permissions = {
        "GET": Perm.AUTHENTICATED,
        "POST": Perm.EDIT_MASTER_CONFIG,
        "PUT": Perm.EDIT_MASTER_CONFIG,
        "DELETE": Perm.EDIT_MASTER_CONFIG,
    }

    def _args(self) -> tuple[list[int], list[str]]:
        body = self.body_json()
        return list(body.get("workspaceIds") or []), list(body.get("workspaceNames") or [])

    @api(query=_PAGE, errors=(404,))
    def get(self, pool: str) -> None:
        self.send(_page(self, self.master.pool_bindings.workspaces(pool), "workspaceIds"))

    @api(body=_BODY, body_required=True, errors=(404, 409))
    def post(self, pool: str) -> None:
        self.master.pool_bindings.add(pool, *self._args())
        self.send({})

    @api(body=_BODY, body_required=True, errors=(404,))
    def put(self, pool: str) -> None:
        self.master.pool_bindings.replace(pool, *self._args())
        self.send({})

    @api(body=_BODY, body_required=True, errors=(404,))
    def delete(self, pool: str) -> None:
        self.master.pool_bindings.remove(pool, *self._args())
        self.send({})


class WorkspacePoolsHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_WORKSPACE}

    @api(query=_PAGE, errors=(404,))
    def get(self, ws_id: str) -> None:
        self.authorize_workspace(int(ws_id))
        self.send(
            _page(self, self.master.pool_bindings.available_pools(int(ws_id)), "resourcePools")
        )
