"""Trial source infos (0.38.1's): a task reports that it used a checkpoint or a model version
(``core_context.experimental.report_task_using_checkpoint`` / ``…_model_version``), and the
metrics that task reports become the checkpoint's and the version's:

- ``POST /api/v1/trial-source-info`` (``v1ReportTrialSourceInfoRequest``);
- ``GET /api/v1/checkpoints/{uuid}/metrics`` (``Checkpoint.get_metrics``);
- ``GET /api/v1/models/{name}/versions/{n}/metrics`` (``ModelVersion.get_metrics``).

As 0.38.1's master does, a read lists the reports of every linked trial the caller may see
(others are skipped, not refused), up to 1,000 per trial, oldest step first.
"""

from __future__ import annotations

from typing import Any

from ..errors import Forbidden, InvalidRequest, NotFound
from ..services.access.authz import Perm
from . import _serialize as ser
from ._api import MAX_ID, Q, api, enum, integer, obj, string
from ._base import DetHandler
from ._models import find_model, version_number

_TYPES = ("TRIAL_SOURCE_INFO_TYPE_UNSPECIFIED", "TRIAL_SOURCE_INFO_TYPE_INFERENCE",
          "TRIAL_SOURCE_INFO_TYPE_FINE_TUNING")
_PER_TRIAL = 1000  # 0.38.1's numMetricsLimit
_QUERY = [Q("metricGroup", max_length=64, description="one group (training, validation, …); all when absent"),
          Q("trialSourceInfoType", enum=_TYPES, description="only links of this type")]
_SOURCE = obj(("checkpointUuid", "trialId", "trialSourceInfoType"),
              checkpointUuid=string(64, 1), trialId=integer(1, MAX_ID), trialSourceInfoType=enum(*_TYPES),
              modelId=integer(1, MAX_ID), modelVersion=integer(1, MAX_ID))


class TrialSourceInfoHandler(DetHandler):
    permissions = {"POST": Perm.UPDATE_EXPERIMENT}
    allow_task = True  # a trial's own task reports what it used

    @api(body=obj(("trialSourceInfo",), trialSourceInfo=_SOURCE), body_required=True)
    def post(self) -> None:
        info = self.body_json()["trialSourceInfo"]
        tid = int(info["trialId"])
        self.require_trial(tid)
        self.authorize_trial(tid)
        model_id, version = info.get("modelId"), info.get("modelVersion")
        if (model_id is None) != (version is None):
            raise InvalidRequest("trialSourceInfo: give both modelId and modelVersion, or neither")
        self.master.checkpoints.report_source(trial_id=tid, checkpoint_uuid=info["checkpointUuid"],
                                              kind=info["trialSourceInfoType"], model_id=model_id,
                                              model_version=version)
        self.send({"trialId": tid, "checkpointUuid": info["checkpointUuid"]})


def _reports(handler: DetHandler, trial_ids: list[int]) -> list[dict[str, Any]]:
    """``v1MetricsReport``s of the trials the caller may see, in the query's group."""
    group = handler.get_query_argument("metricGroup", "") or None
    out: list[dict[str, Any]] = []
    for tid in trial_ids:
        try:
            handler.require_trial(tid)
            handler.authorize_trial(tid, Perm.VIEW_EXPERIMENT_ARTIFACTS)
        except (NotFound, Forbidden):
            continue  # 0.38.1: a linked trial the caller cannot see is left out
        for r in handler.master.metrics.history(tid, group, limit=_PER_TRIAL):
            validation = r["group"] == "validation"
            metrics = {"validation_metrics" if validation else "avg_metrics": r["metrics"]}
            if group is None and validation:
                # The stock SDK reads every report of an all-groups read under avg_metrics.
                metrics["avg_metrics"] = r["metrics"]
            out.append(ser.metrics_report(r, tid, metrics))
    return out


def _kind(handler: DetHandler) -> str | None:
    kind = handler.get_query_argument("trialSourceInfoType", "") or None
    return None if kind == "TRIAL_SOURCE_INFO_TYPE_UNSPECIFIED" else kind


class CheckpointMetricsHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_EXPERIMENT_ARTIFACTS}
    allow_task = True

    @api(query=_QUERY)
    def get(self, uuid: str) -> None:
        self.master.checkpoints.get(uuid)  # 404 for an unknown checkpoint
        self.authorize_checkpoint(uuid)
        trials = self.master.checkpoints.source_trials(checkpoint_uuid=uuid, kind=_kind(self))
        self.send({"metrics": _reports(self, trials)})


class ModelVersionMetricsHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_MODEL_REGISTRY}

    @api(query=_QUERY)
    def get(self, ident: str, number: str) -> None:
        model = find_model(self, ident)
        version = self.master.models.version(model, version_number(number))
        trials = self.master.checkpoints.source_trials(model_id=model.id, model_version=version.version,
                                                       kind=_kind(self))
        self.send({"metrics": _reports(self, trials)})
