"""/info, /api/v1/master, login, logout, me, a user by name (the rest of /api/v1/users: _users)."""

from __future__ import annotations

from .. import __version__
from ..errors import InvalidRequest, NotFound
from ..services.access.authz import Perm
from . import _serialize as ser
from ._api import BOOL, api, obj, string
from ._base import DetHandler
from ._master import cluster_message_json

PROTOCOL_VERSION = "0.38.1"


def master_info(handler: DetHandler) -> dict:
    m = handler.master
    return {
        "version": PROTOCOL_VERSION,
        "detJupyterVersion": __version__,
        "masterId": m.master_id,
        "clusterId": m.cluster_id,
        "clusterName": "det-jupyter",
        "telemetryEnabled": False,
        "hasCustomLogo": False,
        "strictJobQueueControl": False,
        "rbacEnabled": True,
        "userManagementEnabled": True,
        "product": "PRODUCT_UNSPECIFIED",
        "featureSwitches": [],
        "ssoProviders": [],
        **({"clusterMessage": cluster_message_json(msg)} if (msg := m.cluster_messages.active()) else {}),
    }


class InfoHandler(DetHandler):
    public = True

    @api()
    def get(self) -> None:
        info = master_info(self)
        self.send({
            "version": info["version"],
            "det_jupyter_version": info["detJupyterVersion"],
            "master_id": info["masterId"],
            "cluster_id": info["clusterId"],
            "cluster_name": info["clusterName"],
            "telemetry": {"enabled": False},
            "sso_providers": [],
        })


class MasterHandler(DetHandler):
    """Public, as in Determined (GetMaster is unauthenticated): the stock CLI reads
    ``rbacEnabled`` from it without a session before ``det user-group`` and ``det rbac``."""

    public = True

    @api()
    def get(self) -> None:
        self.send(master_info(self))


class LoginHandler(DetHandler):
    public = True

    # Bad credentials are 403, as in Determined (the stock client reads 403 as "log in again").
    @api(body=obj(("username", "password"), username=string(), password=string(), isHashed=BOOL),
         body_required=True, errors=(403,))
    def post(self) -> None:
        body = self.body_json()
        username = body["username"]
        password = body["password"]
        token, user = self.master.auth.login(username, password, bool(body.get("isHashed", False)))
        self.send({"token": token, "user": ser.user(user)})


class LogoutHandler(DetHandler):
    permissions = {"POST": Perm.AUTHENTICATED}

    @api()
    def post(self) -> None:
        token = (self.request.headers.get("Authorization") or "").partition(" ")[2].strip()
        self.master.auth.logout(token)
        self.send({})


class MeHandler(DetHandler):
    permissions = {"GET": Perm.AUTHENTICATED}
    allow_task = True

    @api()
    def get(self) -> None:
        self.send({"user": ser.user(self.user)})


class UserByNameHandler(DetHandler):
    permissions = {"GET": Perm.AUTHENTICATED}
    allow_task = True

    @api()
    def get(self, username: str) -> None:
        try:
            user = self.master.auth.user_by_name(username)
        except InvalidRequest:
            raise NotFound(f"user {username} not found") from None
        self.send({"user": ser.user(user)})
