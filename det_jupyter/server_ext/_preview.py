"""``POST /api/v1/preview-hp-search`` (``det preview-search``): a config's training plan,
without creating anything. Any logged-in user, as in 0.38.1."""

from __future__ import annotations

from ..services.access.authz import Perm
from ._api import ANY_OBJECT, api, obj
from ._base import DetHandler


class PreviewSearchHandler(DetHandler):
    permissions = {"POST": Perm.AUTHENTICATED}

    @api(body=obj(("config",), config=ANY_OBJECT), body_required=True)
    def post(self) -> None:
        self.send({"summary": self.master.experiments.preview_search(self.body_json()["config"])})
