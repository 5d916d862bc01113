"""/api/v1/experiments and their verbs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ..config import tgz_to_b64
from ..errors import InvalidRequest, NotFound
from ..names import MAX_LABEL
from ..services.access.authz import Perm
from ..services.checkpoints import order as ckorder
from ..services.experiments.submission import Submission
from ..services.experiments.trial_list import SORT_BY as TRIAL_SORTS
from ..services.experiments.views import ExperimentView
from ..services.jobs.control import QueueUpdate
from . import _serialize as ser
from ._api import BOOL, Q, api, ident, integer, labels, obj, paging, string, text, users
from ._base import CONTEXT_HINT, MAX_BODY, DetHandler
from ._checkpoint_query import CHECKPOINT_LIST, checkpoint_query
from ._templates import template_name
from ._wire import CONTEXT, EXPERIMENT_STATES, TRIAL_STATES

_ACTIVE_ALIASES = {"QUEUED", "PULLING", "STARTING", "RUNNING"}


def exp_json(v: ExperimentView) -> dict[str, Any]:
    out = ser.experiment(v.row, username=v.username, num_trials=v.num_trials,
                         alloc_states=v.alloc_states, best=v.best, trial_ids=v.trial_ids,
                         progress=v.progress)
    out["unmanaged"] = bool(v.row.unmanaged)
    if v.row.external_experiment_id is not None:
        out["externalExperimentId"] = v.row.external_experiment_id
    return out


def get_view(handler: DetHandler, exp_id: int, perm: Perm | None = None) -> ExperimentView:
    """The experiment, once the caller may do this verb's permission (or ``perm``) to it."""
    handler.require_experiment(exp_id)
    handler.authorize_experiment(exp_id, perm)
    view = handler.master.views.experiment(exp_id)
    if view is None:
        raise NotFound(f"experiment {exp_id} not found")
    return view


def _json_text(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"))``, built a piece at a time: the C encoder
    holds the GIL until it is done, so a thread encoding a config of megabytes in one call
    stalls the event loop as much as encoding it there would. Containers of more than a few
    items are joined here, in Python, so the loop gets the GIL between their items."""
    if isinstance(value, dict) and len(value) > 8 and all(isinstance(k, str) for k in value):
        return "{" + ",".join(json.dumps(k) + ":" + _json_text(v) for k, v in value.items()) + "}"
    if isinstance(value, list) and len(value) > 8:
        return "[" + ",".join(_json_text(v) for v in value) + "]"
    return json.dumps(value, separators=(",", ":"))


def job_summary(v: ExperimentView) -> dict[str, Any]:
    state = "STATE_SCHEDULED" if ({"ASSIGNED", "PULLING", "RUNNING"} & v.alloc_states) else "STATE_QUEUED"
    return {"state": state, "jobsAhead": 0}


#: ``v1CreateExperimentRequest``: the config is YAML text, checked against the experiment
#: config schema by the service.
CREATE_EXPERIMENT = obj(("config",), config=string(MAX_BODY), modelDefinition=CONTEXT, template=string(),
                        projectId=ident(), activate=BOOL, validateOnly=BOOL, unmanaged=BOOL)


def submission(body: dict[str, Any], *, unmanaged: bool) -> Submission:
    """A ``v1CreateExperimentRequest`` body, its types checked (``ExperimentSubmission``
    does the rest)."""
    config_text = body.get("config")
    if not isinstance(config_text, str):
        raise InvalidRequest("config must be the experiment's YAML text (a string)")
    files = body.get("modelDefinition") or []
    if not isinstance(files, list):
        raise InvalidRequest("modelDefinition must be a list of files")
    template = template_name(body, "template") if body.get("template") else None
    project_id = body.get("projectId")
    if project_id is not None and (not isinstance(project_id, int) or isinstance(project_id, bool)):
        raise InvalidRequest("projectId must be an integer")
    return Submission(config_text, files, template=template, project_id=project_id,
                      activate=bool(body.get("activate", True)),
                      validate_only=bool(body.get("validateOnly", False)), unmanaged=unmanaged)


class ExperimentsHandler(DetHandler):
    max_body = MAX_BODY
    too_large_hint = CONTEXT_HINT
    permissions = {"GET": Perm.VIEW_EXPERIMENT_METADATA, "POST": Perm.CREATE_EXPERIMENT}

    @api(query=[*paging(), Q("states", many=True, enum=EXPERIMENT_STATES), Q("archived", "boolean"),
                users(), Q("name", max_length=128), Q("projectId", "integer", minimum=0),
                Q("labels", many=True, max_length=MAX_LABEL, max_items=5,
                  description="only experiments that carry every one of these labels")])
    def get(self) -> None:
        offset = self.int_arg("offset", 0) or 0
        limit = self.int_arg("limit", 0) or 0
        states = []
        for s in self.get_query_arguments("states"):
            s = s.removeprefix("STATE_")
            states.append("ACTIVE" if s in _ACTIVE_ALIASES else s)
        if "ACTIVE" in states:
            states.append("RUNNING")  # an unmanaged experiment's own state
        archived_raw = self.get_query_argument("archived", None)
        views, total = self.master.views.experiments(
            users=self.get_query_arguments("users") or None,
            states=states or None,
            archived=None if archived_raw in (None, "") else self.bool_arg("archived"),
            name=self.get_query_argument("name", None),
            project_id=self.int_arg("projectId"),
            offset=offset,
            limit=limit,
            descending=self.get_query_argument("orderBy", "") == "ORDER_BY_DESC",
            workspace_ids=self.visible_workspaces(),
            labels=self.get_query_arguments("labels") or None,
        )
        self.send({"experiments": [exp_json(v) for v in views],
                   "pagination": ser.pagination(offset, limit, total, len(views))})

    @api(body=CREATE_EXPERIMENT, body_required=True)
    async def post(self) -> None:
        """Create an experiment (``ExperimentSubmission``), or with ``unmanaged`` one that a process
        outside the cluster reports into (0.38.1's core_v2): stored PAUSED, never searched or
        scheduled (``services.unmanaged``)."""
        body = await self.body_json_async()
        sub = submission(body, unmanaged=bool(body.get("unmanaged", False)))
        done = await self.master.submission.submit(self.access, sub)
        config = done.prepared.config
        answer: dict[str, Any]
        if done.view is None:  # validateOnly
            answer = {"experiment": {"id": 0, "name": config["name"], "archived": False, "config": config,
                                     "originalConfig": done.prepared.config_text, "jobId": "", "numTrials": 0,
                                     "projectId": 1, "projectOwnerId": self.user.id,
                                     "searcherType": config["searcher"]["name"], "startTime": ser.ts(0),
                                     "state": "STATE_PAUSED", "username": self.user.username,
                                     "unmanaged": sub.unmanaged},
                      "config": config}
        else:
            answer = {"experiment": exp_json(done.view), "config": config}
            if done.warnings is not None:
                answer["warnings"] = done.warnings
        loop = asyncio.get_running_loop()
        self.send_text(await loop.run_in_executor(None, _json_text, answer))


#: ``PatchExperimentPatchResources``: what ``det e set priority|weight|max-slots`` changes.
RESOURCES = {**obj(priority=integer(1, 99), weight={"type": "number", "minimum": 0, "exclusiveMinimum": True},
                   maxSlots=integer(0)), "additionalProperties": False}


class ExperimentHandler(DetHandler):
    allow_task = True
    permissions = {"GET": Perm.VIEW_EXPERIMENT_METADATA, "PATCH": Perm.UPDATE_EXPERIMENT_METADATA,
                   "DELETE": Perm.DELETE_EXPERIMENT}

    @api()
    def get(self, exp_id: str) -> None:
        view = get_view(self, int(exp_id))
        self.send({"experiment": exp_json(view), "config": view.row.config, "jobSummary": job_summary(view)})

    @api(body=obj(name=text(512, empty=False), description=string(), notes=string(1024 * 1024),
                  labels=labels(), resources=RESOURCES))
    def patch(self, exp_id: str) -> None:
        """``v1PatchExperiment``: ``resources`` (``det e set priority|weight|max-slots``)
        changes the experiment's job; name, description, notes and labels its record."""
        eid = int(exp_id)
        body = self.body_json()
        res = body.get("resources")
        get_view(self, eid, Perm.UPDATE_EXPERIMENT if res is not None else None)
        if res is not None:
            update = QueueUpdate(
                self.master.jobs.job_of_experiment(eid), priority=res.get("priority"),
                weight=res.get("weight"), max_slots=res.get("maxSlots"),
            )
            self.master.jobs.update(self.user, [update], strict=False)
        fields = {k: body[k] for k in ("name", "description", "notes", "labels") if body.get(k) is not None}
        if fields:
            self.master.experiments.patch(self.user, eid, **fields)
        view = get_view(self, eid)
        self.send({"experiment": exp_json(view)})

    @api(errors=(409,))
    def delete(self, exp_id: str) -> None:
        """``DELETE /api/v1/experiments/{id}`` (``det e delete``): a finished experiment, its
        trials, metrics, checkpoints (files too), logs and context."""
        from ._experiment_admin import delete_experiment  # (it imports this module)

        delete_experiment(self, int(exp_id))


class ExperimentVerbHandler(DetHandler):
    permissions = {"POST": Perm.UPDATE_EXPERIMENT}

    @api(errors=(409,))
    def post(self, exp_id: str, verb: str) -> None:
        eid = int(exp_id)
        get_view(self, eid)
        service = self.master.experiments
        {"activate": service.activate, "pause": service.pause,
         "cancel": service.cancel, "kill": service.kill}[verb](eid)
        self.send({})


class ExperimentContinueHandler(DetHandler):
    """``POST /api/v1/experiments/continue`` (``det e continue``, 0.38.1's
    ``ContinueExperiment``): a finished experiment trains on with ``overrideConfig`` (YAML)
    merged onto its config; needs the right to edit it."""

    max_body = MAX_BODY
    permissions = {"POST": Perm.UPDATE_EXPERIMENT}

    @api(body=obj(("id",), id=ident(), overrideConfig=string(MAX_BODY)), body_required=True, errors=(409,))
    async def post(self) -> None:
        body = await self.body_json_async()
        eid = int(body["id"])
        get_view(self, eid)
        view = await self.master.submission.continue_experiment(self.access, eid, body.get("overrideConfig") or "")
        self.send({"experiment": exp_json(view)})


class ExperimentTrialsHandler(DetHandler):
    """``GET /api/v1/experiments/{id}/trials`` (``Experiment.list_trials``, ``det e
    list-trials``): sorted by ``sortBy`` and paged as 0.38.1 does (``services._trial_list``),
    each trial with its best and latest validation."""

    allow_task = True
    permissions = {"GET": Perm.VIEW_EXPERIMENT_METADATA}

    @api(query=[*paging(negative_offset=True), Q("states", many=True, enum=TRIAL_STATES),
                Q("sortBy", enum=TRIAL_SORTS, description="the trials' order (by id when not given)")])
    def get(self, exp_id: str) -> None:
        eid = int(exp_id)
        self.require_experiment(eid)
        self.authorize_experiment(eid)  # 404 if it does not exist; its view is not needed
        offset = self.int_arg("offset", 0) or 0
        limit = self.int_arg("limit", 0) or 0
        states = [s.removeprefix("STATE_") for s in self.get_query_arguments("states")]
        config = self.master.experiments.get(eid).config
        views, total, start, validations = self.master.views.experiment_trials(
            eid, config, states=states or None, offset=offset, limit=limit,
            sort_by=self.get_query_argument("sortBy", None) or "SORT_BY_ID",
            descending=self.get_query_argument("orderBy", "") == "ORDER_BY_DESC", now=self.master.clock.now(),
        )
        self.send({"trials": [ser.trial(v.row, alloc_states=v.alloc_states, validations=validations.get(v.row.id))
                              for v in views],
                   "pagination": ckorder.pagination(offset, limit, start, start + len(views), total)})


class ExperimentCheckpointsHandler(DetHandler):
    """``GET /api/v1/experiments/{id}/checkpoints`` (``Experiment.list_checkpoints``,
    ``top_checkpoint``, ``det e list-checkpoints|download``): filtered, sorted and paged as
    0.38.1 does (``services._checkpoint_order``), each with the metrics at its step."""

    permissions = {"GET": Perm.VIEW_EXPERIMENT_ARTIFACTS}

    @api(query=CHECKPOINT_LIST)
    def get(self, exp_id: str) -> None:
        eid = int(exp_id)
        view = get_view(self, eid)
        query = checkpoint_query(self)
        config = view.row.config
        page = self.master.checkpoints.listing(config, query, experiment_id=eid)
        wanted = sorted({c.row.trial_id for c in page.items if c.row.trial_id is not None})
        trials = {v.row.id: v.row for v in self.master.views.trials(trial_ids=wanted, count=False)[0]} \
            if wanted else {}
        self.send({"checkpoints": [ser.listed_checkpoint(c, trial_row=trials.get(c.row.trial_id), exp_config=config)
                                   for c in page.items],
                   "pagination": ckorder.pagination(query.offset, query.limit, page.start, page.end, page.total)})


class BestValidationHandler(DetHandler):
    allow_task = True
    permissions = {"GET": Perm.VIEW_EXPERIMENT_METADATA}

    @api()
    def get(self, exp_id: str) -> None:
        view = get_view(self, int(exp_id))
        if view.best is None:
            raise NotFound(f"experiment {exp_id} has no validation metric yet")
        self.send({"metric": view.best[1]})


class ModelDefHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_EXPERIMENT_ARTIFACTS}

    @api()
    def get(self, exp_id: str) -> None:
        get_view(self, int(exp_id))
        self.send({"b64Tgz": tgz_to_b64(self.master.experiments.context_tgz(int(exp_id)))})
