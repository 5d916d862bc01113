"""The routes of unmanaged experiments and trials (0.38.1's ``core_v2`` off the cluster): a
script or notebook, with its user's own token, puts its experiment by an external id, creates or
puts its trial, starts it, reports into it and ships its output (``services.unmanaged``).

``POST /api/v1/experiments`` with ``unmanaged`` and ``PATCH /api/v1/trials/{id}`` (state and
heartbeats) are in ``_experiments`` and ``_trials``, beside the managed verbs of the same routes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .. import names as _names
from ..errors import Forbidden, InvalidRequest
from ..services.access.authz import Perm
from ..services.accounts.auth import AllocationPrincipal
from . import _serialize as ser
from ._api import ANY_OBJECT, BOOL, api, array, echo, ident, integer, obj, string, text
from ._base import CONTEXT_HINT, MAX_BODY, DetHandler
from ._experiments import CREATE_EXPERIMENT, exp_json, get_view, submission
from ._json import checked_json
from ._tasks import CHECKPOINT_FIELDS, CheckpointsHandler
from ._trials import trial_view

MAX_EXTERNAL_ID = 255
_EXTERNAL_ID = text(MAX_EXTERNAL_ID, empty=False)
#: ``v1CreateTrialRequest``.
CREATE_TRIAL = obj(("experimentId",), experimentId=ident(), hparams=ANY_OBJECT, unmanaged=BOOL)
#: One line of output as the stock ``_UnmanagedTrialLogShipper`` sends it to ``/task-logs``.
SHIPPED_LINE = obj(("task_id", "log"), task_id=string(256, min_length=1), log=string(64 * 1024 * 1024),
                   timestamp=string(64), rank={"anyOf": [string(16), integer(0, 2**31 - 1)]})


def external_id(kind: str, value: Any) -> str:
    """An external id: one line of text (no control characters), 1 to 255 characters."""
    return _names.check_text(kind, value, max_len=MAX_EXTERNAL_ID, empty=False)


def _require_unmanaged(body: Any, what: str) -> None:
    if body.get("unmanaged") is not True:
        raise InvalidRequest(f"unmanaged: only unmanaged {what} are made through this route; send unmanaged: true "
                             "(a script or notebook reporting from outside the cluster, as core_v2 does)")


class ExperimentByExternalIdHandler(DetHandler):
    """``PUT /api/v1/experiments/by-external-id/{id}`` (``PutExperiment``): the unmanaged
    experiment of that external id, created if there is none; an existing one takes the new
    config (as 0.38.1's upsert does) once the caller may edit it."""

    max_body = MAX_BODY
    too_large_hint = CONTEXT_HINT
    permissions = {"PUT": Perm.CREATE_EXPERIMENT}

    @api(body=CREATE_EXPERIMENT, body_required=True, path={"external_experiment_id": _EXTERNAL_ID})
    async def put(self, external_experiment_id: str) -> None:
        ext = external_id("external experiment id", external_experiment_id)
        body = await self.body_json_async()
        _require_unmanaged(body, "experiments")
        sub = dataclasses.replace(submission(body, unmanaged=True), validate_only=False)
        prepared, project_id = await self.master.submission.prepare(self.access, sub)
        service = self.master.experiments.unmanaged
        exp_id, created = service.put_experiment(self.user, prepared, project_id, ext)
        if not created:
            get_view(self, exp_id, Perm.UPDATE_EXPERIMENT)
            service.update_config(exp_id, prepared)
        view = self.master.views.experiment(exp_id)
        assert view is not None
        self.send({"experiment": exp_json(view), "config": view.row.config})


class UnmanagedTrialsHandler(DetHandler):
    """``POST /api/v1/trials`` (``CreateTrial``) and ``PUT /api/v1/trials`` (``PutTrial``: the
    trial of an external id, created if there is none) in an unmanaged experiment."""

    permissions = {"POST": Perm.UPDATE_EXPERIMENT, "PUT": Perm.UPDATE_EXPERIMENT}

    @api(body=CREATE_TRIAL, body_required=True)
    def post(self) -> None:
        self._create(self.body_json(), None)

    @api(body=obj(("createTrialRequest", "externalTrialId"), createTrialRequest=CREATE_TRIAL,
                  externalTrialId=_EXTERNAL_ID), body_required=True)
    def put(self) -> None:
        body = self.body_json()
        self._create(body["createTrialRequest"], external_id("externalTrialId", body["externalTrialId"]))

    def _create(self, req: Any, ext: str | None) -> None:
        _require_unmanaged(req, "trials")
        exp_id = req["experimentId"]
        self.authorize_experiment(exp_id)
        trial_id = self.master.experiments.unmanaged.create_trial(exp_id, req.get("hparams") or {}, ext)
        v = trial_view(self, trial_id)
        self.send({"trial": ser.trial(v.row, alloc_states=v.alloc_states)})


class TrialStartHandler(DetHandler):
    """``POST /api/v1/trials/{id}/start`` (``StartTrial``): a new run of an unmanaged trial;
    from its second run on, where it resumes (its latest checkpoint and its steps)."""

    permissions = {"POST": Perm.UPDATE_EXPERIMENT_METADATA}

    @api(body=obj(trialId=echo(integer(), "trial_id"), resume=BOOL), errors=(409,))
    def post(self, trial_id: str) -> None:
        tid = int(trial_id)
        self.authorize_trial(tid)
        body = self.body_json()
        if body.get("trialId") not in (None, tid):
            raise InvalidRequest(f"trialId {body['trialId']!r} differs from the trial in the path")
        run = self.master.experiments.unmanaged.start_trial(tid, resume=bool(body.get("resume", False)))
        out: dict[str, Any] = {"trialRunId": run.run_id, "stepsCompleted": run.steps_completed}
        if run.latest_checkpoint is not None:
            out["latestCheckpoint"] = run.latest_checkpoint
        self.send(out)


class ShippedLogsHandler(DetHandler):
    """``POST /task-logs``: what an unmanaged trial's process printed (the stock
    ``_UnmanagedTrialLogShipper``; a JSON list of lines). 0.38.1 takes it unauthenticated;
    here the caller must be one who may report into the task's trial."""

    max_body = 64 * 1024 * 1024
    body_strings = "scrub"
    permissions = {"POST": Perm.UPDATE_EXPERIMENT}

    @api(body=array(SHIPPED_LINE, 100_000), body_required=True)
    def post(self) -> None:
        lines = self._lines()
        unmanaged = self.master.experiments.unmanaged
        trials: dict[str, int | None] = {}
        for task_id in sorted({line["task_id"] for line in lines}):
            self.access.authorize_task_kind(task_id)  # all checked before any is written
            trial_id, _ = unmanaged.trial_of_task(task_id) if task_id.split(".", 1)[0].isdigit() else (None, False)
            trials[task_id] = trial_id
        self.mark_checked()  # each line's task was checked above (an empty list writes nothing)
        for task_id, trial_id in trials.items():
            self.master.logs.append_shipped(task_id, None, trial_id, [
                {"log": line["log"], "timestamp": line.get("timestamp"), "rankId": _rank(line.get("rank"))}
                for line in lines if line["task_id"] == task_id])
        self.send({})

    def _lines(self) -> list[dict[str, Any]]:
        """The body: a JSON list (``body_json`` takes objects only), checked as it is."""
        if self._too_large is not None:
            raise self._too_large
        if not self._body:
            raise InvalidRequest("this route needs a JSON list of log lines as its request body")
        body = checked_json(bytes(self._body), scrub=True)
        self.spec.check_body(body)
        return body


def _rank(value: Any) -> int | None:
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and value.isdigit() and len(value) < 10 else None


class ReportedCheckpointsHandler(CheckpointsHandler):
    """``POST /api/v1/checkpoints`` (``ReportCheckpoint``): a task reports with its allocation
    token, as before; an unmanaged trial's process with its user's token, naming the trial's
    task (``taskId``)."""

    @api(body=obj(checkpoint=obj(**CHECKPOINT_FIELDS), **CHECKPOINT_FIELDS), body_required=True)
    def post(self) -> None:
        if isinstance(self.principal, AllocationPrincipal):
            super().post()
            return
        body = self.body_json()
        ckpt = body.get("checkpoint") or body
        task_id = ckpt.get("taskId")
        if not isinstance(task_id, str) or not task_id:
            raise InvalidRequest("taskId: a checkpoint reported with a user's token names its unmanaged trial's "
                                 "task (the trial's taskId)")
        trial_id, unmanaged = self.master.experiments.unmanaged.trial_of_task(task_id)
        self.authorize_trial(trial_id)
        if not unmanaged:
            raise Forbidden("checkpoints of a trial on the cluster are reported by its task (its allocation token)")
        self.master.checkpoints.report(ckpt, trial_id=trial_id, task_id=task_id, allocation_id=None)
        self.send({})
