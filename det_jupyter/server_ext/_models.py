"""/api/v1/models (the model registry) and the deletion of checkpoints by users.

A model is named in the path by name or by id (``/api/v1/models/{name}``; the stock client
url-encodes names, Tornado decodes them). Who may do what: VIEW_MODEL_REGISTRY to see a model
(otherwise 404), CREATE_MODEL_REGISTRY in the workspace to create one there,
EDIT_MODEL_REGISTRY to change it or register versions (and VIEW_EXPERIMENT_ARTIFACTS on the
checkpoint), DELETE_MODEL_REGISTRY to delete or move it away (CREATE_MODEL_REGISTRY where it
goes), DELETE_MODEL_VERSION to delete a version.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import InvalidRequest, NotFound
from ..services.access.authz import Perm
from ..services.registry.models import ModelRecord, VersionRecord, check_fields
from . import _serialize as ser
from ._api import (
    ANY_OBJECT,
    ORDER_BY,
    Q,
    api,
    array,
    ident,
    integer,
    labels,
    name,
    obj,
    string,
    users,
)
from ._base import DetHandler
from ._wire import CHECKPOINT_UUID

_MODEL_SORT = ("SORT_BY_UNSPECIFIED", "SORT_BY_NAME", "SORT_BY_DESCRIPTION", "SORT_BY_CREATION_TIME",
               "SORT_BY_LAST_UPDATED_TIME", "SORT_BY_NUM_VERSIONS", "SORT_BY_WORKSPACE")
_VERSION_SORT = ("SORT_BY_UNSPECIFIED", "SORT_BY_VERSION", "SORT_BY_CREATION_TIME")
MODEL_NAME = name(255, all_digits=False)
_VERSION_NAME = {"anyOf": [name(255), {"type": "string", "maxLength": 0}]}
_TEXT = string(64 * 1024)
#: The fields of ``v1PatchModel`` / ``v1PostModelRequest`` we keep.
_MODEL = dict(description=_TEXT, labels=labels(), metadata=ANY_OBJECT, notes=string(1024 * 1024))
_VERSION = dict(name=_VERSION_NAME, comment=_TEXT, labels=labels(), metadata=ANY_OBJECT,
                notes=string(1024 * 1024))
#: ``DELETE /api/v1/checkpoints`` (v1DeleteCheckpointsRequest).
DELETE_CHECKPOINTS = obj(("checkpointUuids",), checkpointUuids=array(CHECKPOINT_UUID, 10_000, minItems=1))

_MODEL_FIELDS = ("description", "labels", "metadata", "notes")
_VERSION_FIELDS = ("name", "comment", "labels", "metadata", "notes")


# -- wire objects ------------------------------------------------------------------------

def model_json(m: ModelRecord) -> dict[str, Any]:
    """``v1Model``."""
    return {
        "id": m.id, "name": m.name, "description": m.description, "labels": m.labels,
        "metadata": m.metadata, "notes": m.notes, "workspaceId": m.workspace_id,
        "userId": m.user_id, "username": m.username, "creationTime": ser.ts(m.created_at),
        "lastUpdatedTime": ser.ts(m.updated_at), "numVersions": m.num_versions,
        "archived": m.archived,
    }


def checkpoint_json(handler: DetHandler, uuid: str) -> dict[str, Any]:
    """``v1Checkpoint``, as ``GET /api/v1/checkpoints/{uuid}`` serves it."""
    master = handler.master
    row = master.checkpoints.get(uuid)
    trial = master.views.trial(row.trial_id) if row.trial_id else None
    cfg = master.experiments.get(row.experiment_id).config if row.experiment_id else None
    return ser.checkpoint(row, trial_row=trial.row if trial else None, exp_config=cfg)


def version_json(handler: DetHandler, v: VersionRecord) -> dict[str, Any]:
    """``v1ModelVersion``."""
    return {
        "id": v.id, "model": model_json(v.model), "version": v.version,
        "checkpoint": checkpoint_json(handler, v.checkpoint_uuid), "name": v.name,
        "comment": v.comment, "labels": v.labels, "metadata": v.metadata, "notes": v.notes,
        "userId": v.user_id, "username": v.username, "creationTime": ser.ts(v.created_at),
        "lastUpdatedTime": ser.ts(v.updated_at),
    }


# -- helpers -----------------------------------------------------------------------------

def find_model(handler: DetHandler, ident: str, perm: Perm | None = None) -> ModelRecord:
    """The model named (or numbered) ``ident``, once the caller may do ``perm`` to it."""
    model = handler.master.models.get(ident)
    handler.authorize(model.workspace_id, f"model {ident}", perm)
    return model


def authorize_destination(handler: DetHandler, ws: int, label: Any, perm: Perm) -> None:
    """``perm`` in workspace ``ws`` (named ``label`` in the request); 404 names the request's."""
    try:
        handler.authorize_workspace(ws, perm)
    except NotFound:
        raise NotFound(f"workspace {label} not found") from None


def _ints(handler: DetHandler, name: str) -> list[int]:
    out = []
    for raw in handler.get_query_arguments(name):
        try:
            out.append(int(raw))
        except ValueError:
            raise InvalidRequest(f"query parameter {name} must be integers, got {raw!r}") from None
    return out


def version_number(raw: str) -> int:
    """A model version's number from the path (versions are numbered from 1)."""
    number = int(raw)
    if number < 1:
        raise NotFound(f"version {raw} not found; versions are numbered from 1")
    return number


def _move(handler: DetHandler, model: ModelRecord, body: dict[str, Any], *, by_id: str,
          by_name: str | None = None) -> None:
    """Move the model where ``body`` says, if it names another workspace."""
    models = handler.master.models
    dest = models.workspace_id(workspace_id=body.get(by_id),
                               workspace_name=body.get(by_name) if by_name else None)
    if dest == model.workspace_id:
        return
    handler.authorize(model.workspace_id, f"model {model.name}", Perm.DELETE_MODEL_REGISTRY)
    label = body.get(by_name) if by_name and body.get(by_name) else dest
    authorize_destination(handler, dest, label, Perm.CREATE_MODEL_REGISTRY)
    models.move(model, dest)


# -- models ------------------------------------------------------------------------------

class ModelsHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_MODEL_REGISTRY, "POST": Perm.CREATE_MODEL_REGISTRY}

    @api(query=[Q("offset", "integer", description="negative: from the end"), Q("limit", "integer", minimum=0),
                Q("orderBy", enum=ORDER_BY), Q("sortBy", enum=_MODEL_SORT), Q("archived", "boolean"),
                Q("name", max_length=128), Q("description", max_length=512),
                Q("labels", many=True, max_length=255, max_items=5), users(10),
                Q("userIds", "integer", many=True), Q("workspaceIds", "integer", many=True),
                Q("workspaceNames", many=True, max_length=80, max_items=10), Q("id", "integer", minimum=0)])
    def get(self) -> None:
        archived = self.get_query_argument("archived", None)
        order = self.get_query_argument("orderBy", "")
        models, total, start = self.master.models.search(
            visible=self.visible_workspaces(),
            name=self.get_query_argument("name", None),
            description=self.get_query_argument("description", None),
            labels=self.get_query_arguments("labels") or None,
            users=self.get_query_arguments("users") or None,
            user_ids=_ints(self, "userIds") or None,
            workspace_ids=_ints(self, "workspaceIds") or None,
            workspace_names=self.get_query_arguments("workspaceNames") or None,
            archived=None if archived in (None, "") else self.bool_arg("archived"),
            model_id=self.int_arg("id"),
            sort_by=self.get_query_argument("sortBy", ""),
            descending=order == "ORDER_BY_DESC",
            offset=self.int_arg("offset", 0) or 0,
            limit=self.int_arg("limit", 0) or 0,
        )
        self.send({"models": [model_json(m) for m in models],
                   "pagination": ser.pagination(start, self.int_arg("limit", 0) or 0, total, len(models))})

    @api(body=obj(("name",), name=MODEL_NAME, workspaceId=ident(), workspaceName=string(), **_MODEL),
         body_required=True, errors=(409,))
    def post(self) -> None:
        body = self.body_json()
        models = self.master.models
        ws = models.workspace_id(workspace_id=body.get("workspaceId"),
                                 workspace_name=body.get("workspaceName"))
        authorize_destination(self, ws, body.get("workspaceName") or ws, self.perm)
        model = models.create(self.user.id, body.get("name"), ws, check_fields(body, _MODEL_FIELDS))
        self.send({"model": model_json(model)})


class ModelHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_MODEL_REGISTRY, "PATCH": Perm.EDIT_MODEL_REGISTRY,
                   "DELETE": Perm.DELETE_MODEL_REGISTRY}

    @api()
    def get(self, ident: str) -> None:
        self.send({"model": model_json(find_model(self, ident))})

    @api(body=obj(name=MODEL_NAME, workspaceId=ident(), workspaceName=string(), **_MODEL), errors=(409,))
    def patch(self, ident: str) -> None:
        """``v1PatchModel``; a workspaceId or workspaceName moves it (the stock SDK's
        ``move_to_workspace``)."""
        body = self.body_json()
        model = find_model(self, ident)
        fields = check_fields(body, ("name", *_MODEL_FIELDS))
        if body.get("workspaceId") or body.get("workspaceName"):  # 0: unset, as in protobuf
            _move(self, model, body, by_id="workspaceId", by_name="workspaceName")
        model = self.master.models.update(self.master.models.get(model.id), fields)
        self.send({"model": model_json(model)})

    @api()
    def delete(self, ident: str) -> None:
        self.master.models.delete(find_model(self, ident))
        self.send({})


class ModelArchiveHandler(DetHandler):
    permissions = {"POST": Perm.EDIT_MODEL_REGISTRY}

    @api()
    def post(self, ident: str, verb: str) -> None:
        self.master.models.set_archived(find_model(self, ident), verb == "archive")
        self.send({})


class ModelMoveHandler(DetHandler):
    """``POST /api/v1/models/{name}/move {destinationWorkspaceId}``."""

    permissions = {"POST": Perm.DELETE_MODEL_REGISTRY}

    @api(body=obj(("destinationWorkspaceId",), destinationWorkspaceId=integer(1), modelName=string()),
         body_required=True, errors=(409,))
    def post(self, ident: str) -> None:
        model = find_model(self, ident)  # authorized before the body is read
        body = self.body_json()
        _move(self, model, body, by_id="destinationWorkspaceId")
        self.send({})


class ModelLabelsHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_MODEL_REGISTRY}

    @api(query=[Q("workspaceId", "integer", minimum=0)])
    def get(self) -> None:
        labels = self.master.models.labels(self.visible_workspaces(), self.int_arg("workspaceId"))
        self.send({"labels": labels})


# -- versions ----------------------------------------------------------------------------

class ModelVersionsHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_MODEL_REGISTRY, "POST": Perm.EDIT_MODEL_REGISTRY}

    @api(query=[Q("offset", "integer", description="negative: from the end"), Q("limit", "integer", minimum=0),
                Q("orderBy", enum=ORDER_BY), Q("sortBy", enum=_VERSION_SORT)])
    def get(self, ident: str) -> None:
        model = find_model(self, ident)
        limit = self.int_arg("limit", 0) or 0
        versions, total, start = self.master.models.versions(
            model, sort_by=self.get_query_argument("sortBy", ""),
            descending=self.get_query_argument("orderBy", "") == "ORDER_BY_DESC",
            offset=self.int_arg("offset", 0) or 0, limit=limit)
        self.send({"model": model_json(model),
                   "modelVersions": [version_json(self, v) for v in versions],
                   "pagination": ser.pagination(start, limit, total, len(versions))})

    @api(body=obj(("checkpointUuid",), checkpointUuid=CHECKPOINT_UUID, modelName=string(), **_VERSION),
         body_required=True, errors=(409,))
    def post(self, ident: str) -> None:
        model = find_model(self, ident)  # authorized before the body is read
        body = self.body_json()
        uuid = body["checkpointUuid"]
        fields = check_fields(body, _VERSION_FIELDS)
        self.authorize_checkpoint(uuid, Perm.VIEW_EXPERIMENT_ARTIFACTS)
        version = self.master.models.register(model, self.user.id, uuid, fields)
        self.send({"modelVersion": version_json(self, version)})


class ModelVersionHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_MODEL_REGISTRY, "PATCH": Perm.EDIT_MODEL_REGISTRY,
                   "DELETE": Perm.DELETE_MODEL_VERSION}

    @api()
    def get(self, ident: str, number: str) -> None:
        model = find_model(self, ident)
        version = self.master.models.version(model, version_number(number))
        self.send({"modelVersion": version_json(self, version)})

    @api(body=obj(checkpoint=obj(uuid=string(64)), **_VERSION))
    def patch(self, ident: str, number: str) -> None:
        body = self.body_json()
        fields = check_fields(body, _VERSION_FIELDS)
        model = find_model(self, ident)
        current = self.master.models.version(model, version_number(number))
        ckpt = body.get("checkpoint")
        if isinstance(ckpt, dict) and ckpt.get("uuid") not in (None, current.checkpoint_uuid):
            raise InvalidRequest("a version's checkpoint cannot be changed; register the other "
                                 "checkpoint as a new version")
        version = self.master.models.update_version(model, current.version, fields)
        self.send({"modelVersion": version_json(self, version)})

    @api()
    def delete(self, ident: str, number: str) -> None:
        model = find_model(self, ident)
        self.master.models.delete_version(model, version_number(number))
        self.send({})


# -- deleting checkpoints ----------------------------------------------------------------

def _uuids(body: dict[str, Any]) -> list[str]:
    return body["checkpointUuids"]


def delete_checkpoints(handler: DetHandler) -> None:
    """``DELETE /api/v1/checkpoints {checkpointUuids}``: UPDATE_EXPERIMENT on each one's
    experiment; 409 (nothing deleted) if one is used by a model version or is the latest
    checkpoint of a live trial. Files are removed in the background."""
    uuids = _uuids(handler.body_json())
    for uuid in uuids:
        handler.authorize_checkpoint(uuid, Perm.UPDATE_EXPERIMENT)
    handler.master.checkpoint_gc.delete(uuids)
    handler.send({})


class CheckpointsRemoveHandler(DetHandler):
    """``POST /api/v1/checkpoints/rm {checkpointUuids, checkpointGlobs}``: remove matching
    files (the checkpoint becomes PARTIALLY_DELETED, or DELETED when nothing is left)."""

    permissions = {"POST": Perm.UPDATE_EXPERIMENT}

    @api(body=obj(("checkpointUuids",), checkpointUuids=DELETE_CHECKPOINTS["properties"]["checkpointUuids"],
                  checkpointGlobs=array(string(), 1000)), body_required=True, errors=(409,))
    async def post(self) -> None:
        body = self.body_json()
        uuids = _uuids(body)
        globs = body.get("checkpointGlobs") or []
        for uuid in uuids:
            self.authorize_checkpoint(uuid, Perm.UPDATE_EXPERIMENT)
        gc = self.master.checkpoint_gc
        await asyncio.get_running_loop().run_in_executor(None, gc.remove_files, uuids, globs)
        self.send({})
