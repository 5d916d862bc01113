"""``POST /api/v1/checkpoints/{uuid}/metadata`` (``v1PostCheckpointMetadataRequest``): the
stock SDK's ``Checkpoint.add_metadata`` / ``remove_metadata``, which send the checkpoint's
whole new metadata; the answer is the checkpoint as ``GET /api/v1/checkpoints/{uuid}`` shows it."""

from __future__ import annotations

from ..errors import InvalidRequest
from ..services.access.authz import Perm
from . import _serialize as ser
from ._api import ANY, ANY_OBJECT, api, obj, string
from ._base import DetHandler

#: What the SDK sends: a ``v1Checkpoint`` of which only ``uuid`` and ``metadata`` are read.
METADATA = obj(("checkpoint",), checkpoint=obj(("metadata",), uuid=string(64), metadata=ANY_OBJECT,
                                               resources=ANY, training=ANY, state=ANY))


class CheckpointMetadataHandler(DetHandler):
    permissions = {"POST": Perm.UPDATE_EXPERIMENT_METADATA}

    @api(body=METADATA, body_required=True)
    def post(self, uuid: str) -> None:
        self.authorize_checkpoint(uuid)
        body = self.body_json()
        ckpt = body["checkpoint"]
        if ckpt.get("uuid") not in (None, "", uuid):
            raise InvalidRequest(f"checkpoint.uuid {ckpt['uuid']!r} does not match the path's {uuid}")
        service = self.master.checkpoints
        service.set_metadata(uuid, ckpt["metadata"])
        row = service.get(uuid)
        trial = self.master.views.trial(row.trial_id) if row.trial_id else None
        cfg = self.master.experiments.get(row.experiment_id).config if row.experiment_id else None
        self.send({"checkpoint": ser.listed_checkpoint(service.with_metrics(uuid, cfg),
                                                       trial_row=trial.row if trial else None, exp_config=cfg)})
