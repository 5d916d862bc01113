"""Experiment housekeeping routes: archive, unarchive, move, delete, and their bulk forms
under ``/api/v1/projects/{id}/experiments/...``.

``DELETE /api/v1/experiments/{id}`` shares its path with ``ExperimentHandler``; that handler's
``delete`` calls ``delete_experiment`` here.
"""

from __future__ import annotations

from ..errors import Forbidden, InvalidRequest
from ..services.access.authz import Perm
from ..services.accounts.auth import AllocationPrincipal
from ..services.experiments.admin import BulkFilters, int_list
from ._api import BOOL, api, array, echo, ident, integer, obj, string
from ._base import DetHandler
from ._wire import EXPERIMENT_STATES

_IDS = array(integer(), 10_000)
#: ``v1BulkExperimentFilters``.
FILTERS = obj(name=string(), description=string(), archived=BOOL, labels=array(string(), 1000),
              states=array({"type": "string", "enum": list(EXPERIMENT_STATES)}, 100),
              userIds=_IDS, excludedExperimentIds=_IDS)


def _bulk(required: tuple[str, ...] = (), **extra: dict) -> dict:
    """A bulk request: ``experimentIds`` or ``filters`` within the path's project."""
    return obj(required, projectId={**ident(), "x-det-echoes": "project_id", "description": "0, or the path's project"},
               experimentIds=_IDS, filters=FILTERS, **extra)


def delete_experiment(handler: DetHandler, exp_id: int) -> None:
    """``DELETE /api/v1/experiments/{id}``: an ended experiment with all it owns."""
    if isinstance(handler.principal, AllocationPrincipal):
        raise Forbidden("a task's allocation token cannot delete experiments")
    handler.authorize_experiment(exp_id, Perm.DELETE_EXPERIMENT)
    handler.master.experiment_admin.delete([exp_id])
    handler.send({})


def _dest(body: dict, key: str) -> int:
    value = body.get(key)
    if value is None:
        raise InvalidRequest(f"{key} is required (an integer id)")
    return value


class ExperimentArchiveHandler(DetHandler):
    permissions = {"POST": Perm.UPDATE_EXPERIMENT_METADATA}

    @api(errors=(409,))
    def post(self, exp_id: str, verb: str) -> None:
        self.authorize_experiment(int(exp_id))
        self.master.experiment_admin.set_archived(int(exp_id), verb == "archive")
        self.send({})


class ExperimentTensorboardFilesHandler(DetHandler):
    """``DELETE /api/v1/experiments/{id}/tensorboard-files`` (``det e delete-tb-files``): who may
    edit the experiment (0.38.1 asks only for a login)."""

    permissions = {"DELETE": Perm.UPDATE_EXPERIMENT}

    @api()
    def delete(self, exp_id: str) -> None:
        if isinstance(self.principal, AllocationPrincipal):
            raise Forbidden("a task's allocation token cannot delete TensorBoard files")
        self.authorize_experiment(int(exp_id))
        self.master.experiment_admin.delete_tensorboard_files(int(exp_id))
        self.send({})


class ExperimentRetainLogsHandler(DetHandler):
    """``PUT /api/v1/experiments/{id}/retain_logs`` (``det e set log-retention``): an ended
    experiment's trial logs kept ``numDays`` after each trial ended (-1: forever)."""

    permissions = {"PUT": Perm.UPDATE_EXPERIMENT}

    @api(body=obj(("numDays",), experimentId=echo(ident(), "exp_id"), numDays=integer(-1, 32767)),
         body_required=True, errors=(409,))
    def put(self, exp_id: str) -> None:
        if isinstance(self.principal, AllocationPrincipal):
            raise Forbidden("a task's allocation token cannot change log retention")
        self.authorize_experiment(int(exp_id))
        self.master.log_retention.set_for_experiment(int(exp_id), self.body_json()["numDays"])
        self.send({})


class TrialRetainLogsHandler(DetHandler):
    """``PUT /api/v1/trials/{id}/retain_logs`` (``det trial set log-retention``)."""

    permissions = {"PUT": Perm.UPDATE_EXPERIMENT}

    @api(body=obj(("numDays",), trialId=echo(ident(), "trial_id"), numDays=integer(-1, 32767)),
         body_required=True)
    def put(self, trial_id: str) -> None:
        if isinstance(self.principal, AllocationPrincipal):
            raise Forbidden("a task's allocation token cannot change log retention")
        self.authorize_trial(int(trial_id))
        self.master.log_retention.set_for_trial(int(trial_id), self.body_json()["numDays"])
        self.send({})


class CleanupLogsHandler(DetHandler):
    """``POST /api/v1/cleanup_logs`` (``det task cleanup-logs``, cluster admins): delete the
    logs of ended trials past their retention now; ``removedCount`` log lines."""

    permissions = {"POST": Perm.EDIT_MASTER_CONFIG}

    @api()
    def post(self) -> None:
        self.send({"removedCount": str(self.master.log_retention.cleanup())})


class ExperimentMoveHandler(DetHandler):
    """``{destinationProjectId}``: change rights on the experiment, create rights where it goes."""

    permissions = {"POST": Perm.UPDATE_EXPERIMENT}

    @api(body=obj(("destinationProjectId",), destinationProjectId=ident(),
                  experimentId=echo(ident(), "exp_id")), body_required=True, errors=(409,))
    def post(self, exp_id: str) -> None:
        eid = int(exp_id)
        self.authorize_experiment(eid)
        body = self.body_json()
        if body.get("experimentId") not in (None, eid):
            raise InvalidRequest(f"experimentId {body['experimentId']!r} differs from the experiment in the path")
        dest = _dest(body, "destinationProjectId")
        self.authorize_project(dest, Perm.CREATE_EXPERIMENT)
        self.master.experiment_admin.move(eid, dest)
        self.send({})


class _Bulk(DetHandler):
    """``{experimentIds, projectId, filters?}``: with ``filters`` the experiments of the project
    that match them, else those ids; each result says whether that one was done."""

    def _run(self, project_id: str, action: str, dest_key: str | None = None) -> None:
        pid = int(project_id)
        # The verb's permission on the project's workspace: every experiment it may touch is
        # there (each is checked again on its own in the service).
        self.authorize_project(pid)
        body = self.body_json()
        dest = None
        if dest_key is not None:
            dest = _dest(body, dest_key)
            self.authorize_project(dest, Perm.CREATE_EXPERIMENT)
        if body.get("projectId") not in (None, 0, pid):
            raise InvalidRequest(f"projectId {body['projectId']!r} differs from the project in the path ({pid})")
        ids = int_list(body.get("experimentIds"), "experimentIds")
        filters = BulkFilters.parse(body["filters"]) if body.get("filters") is not None else None
        results = self.master.experiment_admin.bulk(action, self.grants, self.perm, pid, ids, filters, dest)
        self.send({"results": results})


class BulkArchiveHandler(_Bulk):
    permissions = {"POST": Perm.UPDATE_EXPERIMENT_METADATA}

    @api(body=_bulk())
    def post(self, project_id: str, verb: str) -> None:
        self._run(project_id, verb)


class BulkMoveHandler(_Bulk):
    permissions = {"POST": Perm.UPDATE_EXPERIMENT}

    @api(body=_bulk(("destinationProjectId",), destinationProjectId=ident()), body_required=True)
    def post(self, project_id: str) -> None:
        self._run(project_id, "move", "destinationProjectId")


class BulkDeleteHandler(_Bulk):
    permissions = {"DELETE": Perm.DELETE_EXPERIMENT}

    @api(body=_bulk())
    def delete(self, project_id: str) -> None:
        self._run(project_id, "delete")
