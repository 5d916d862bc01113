"""``PUT`` and ``DELETE /api/v1/experiments/{id}/labels/{label}``: the stock SDK's
``Experiment.add_label`` / ``remove_label`` (``v1PutExperimentLabelResponse``: the labels
after the change). Adding a label it has, or removing one it lacks, changes nothing."""

from __future__ import annotations

from ..services.access.authz import Perm
from ._api import api
from ._base import DetHandler
from ._experiments import get_view


class ExperimentLabelHandler(DetHandler):
    permissions = {"PUT": Perm.UPDATE_EXPERIMENT_METADATA, "DELETE": Perm.UPDATE_EXPERIMENT_METADATA}

    def _labels(self, exp_id: int) -> list[str]:
        return list(get_view(self, exp_id).row.labels or [])

    @api()
    def put(self, exp_id: str, label: str) -> None:
        eid = int(exp_id)
        labels = self._labels(eid)
        if label not in labels:
            # the rules of a PATCH: the new label is a name (labels stored before pass as they are)
            self.master.experiments.patch(self.user, eid, labels=[*labels, label])
        self.send({"labels": self._labels(eid)})

    @api()
    def delete(self, exp_id: str, label: str) -> None:
        eid = int(exp_id)
        labels = self._labels(eid)
        if label in labels:
            self.master.experiments.patch(self.user, eid, labels=[lb for lb in labels if lb != label])
        self.send({"labels": self._labels(eid)})
