"""The model registry: named models in workspaces, and their numbered versions, each a
checkpoint.

A model is looked up by name or by numeric id (names are never all digits, so the two never
collide). Versions are numbered 1, 2, … per model, in the order they are registered; only a
COMPLETED checkpoint can become one, and a checkpoint a version uses is never deleted
(``checkpoint_gc``). An archived model takes no new versions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from ... import names as _names
from ...errors import Conflict, InvalidRequest, NotFound
from ...store import reader
from ...store import registry as store
from ...store.registry import ModelRecord, VersionRecord
from ..common.clock import Clock

__all__ = ["MAX_NAME", "UNCATEGORIZED", "ModelRecord", "ModelService", "VersionRecord", "check_fields",
           "check_name", "check_values", "check_version_name"]

UNCATEGORIZED = 1
MAX_NAME = 255  # characters in a model or version name
_SORT = {"SORT_BY_NAME": "name", "SORT_BY_DESCRIPTION": "description",
         "SORT_BY_CREATION_TIME": "created_at", "SORT_BY_LAST_UPDATED_TIME": "updated_at",
         "SORT_BY_NUM_VERSIONS": "num_versions", "SORT_BY_WORKSPACE": "workspace_name",
         "SORT_BY_VERSION": "version"}


# -- validation (pure) -------------------------------------------------------------------

def check_name(name: Any, what: str = "model name") -> str:
    """A model name: ``_names.check_name``'s rules (no '/', no control or invisible
    characters…), at most ``MAX_NAME`` characters, not all digits."""
    name = _names.check_name(what, name, max_len=MAX_NAME)
    if name.isdigit():
        raise InvalidRequest(f"the {what} {name!r} is all digits, which would read as a model id; "
                             "add a letter")
    return name


def check_version_name(name: Any) -> str:
    """A version's name: empty (no name), or a name by ``_names.check_name``'s rules (digits
    alone are fine: versions are looked up by number, never by name)."""
    return "" if name == "" else _names.check_name("model version name", name, max_len=MAX_NAME)


def check_fields(body: dict[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    """The present, non-null ``allowed`` fields of ``body``, each checked for its type."""
    out: dict[str, Any] = {}
    for key in allowed:
        value = body.get(key)
        if value is None:
            continue
        if key == "labels":
            value = _names.check_labels(value)
        elif key == "metadata":
            if not isinstance(value, dict):
                raise InvalidRequest("metadata must be a JSON object")
        elif not isinstance(value, str):
            raise InvalidRequest(f"{key} must be a string")
        out[key] = value
    return out


def check_values(fields: dict[str, Any], *, version: bool = False,
                 stored: ModelRecord | VersionRecord | None = None) -> dict[str, Any]:
    """``fields`` with the name and labels checked, as create, update and register store
    them (``version``: a version's, which may be unnamed). What ``stored`` (the object being
    changed) already has passes as it is: names are checked when they are set, not after."""
    out = dict(fields)
    if "labels" in out:
        out["labels"] = _names.check_labels(out["labels"], stored=stored.labels if stored else ())
    if "name" in out and not (stored is not None and out["name"] == stored.name):
        out["name"] = check_version_name(out["name"]) if version else check_name(out["name"])
    return out


# -- the service -------------------------------------------------------------------------

class ModelService:
    """Models and their versions: names checked, workspaces open, versions only of COMPLETED
    checkpoints and never of archived models."""

    def __init__(self, engine: sa.Engine, clock: Clock,
                 on_change: Callable[[], None] = lambda: None) -> None:
        self._engine = engine
        self._reader = reader(engine)
        self._clock = clock
        self._on_change = on_change  # where models live changed: authorization caches drop

    # -- models ---------------------------------------------------------------------------

    def get(self, identifier: str | int) -> ModelRecord:
        """The model named ``identifier``, or whose id it is (all digits)."""
        ident = str(identifier)
        with self._reader.connect() as conn:
            found = store.model(conn, int(ident) if ident.isdigit() else ident)
        if found is None:
            raise NotFound(f"model {ident} not found")
        return found

    def workspace_id(self, *, workspace_id: Any = None, workspace_name: Any = None) -> int:
        """The workspace a request names (by id or by name), Uncategorized if neither."""
        if workspace_name not in (None, ""):
            if not isinstance(workspace_name, str):
                raise InvalidRequest("workspaceName must be a string")
            with self._reader.connect() as conn:
                found = store.workspace_named(conn, workspace_name)
            if found is None:
                raise NotFound(f"workspace {workspace_name!r} not found")
            return int(found)
        if workspace_id in (None, 0):
            return UNCATEGORIZED
        if not isinstance(workspace_id, int) or isinstance(workspace_id, bool):
            raise InvalidRequest("workspaceId must be an integer")
        return workspace_id

    def _check_workspace_open(self, conn: sa.Connection, workspace_id: int) -> None:
        archived = store.workspace_archived(conn, workspace_id)
        if archived is None:
            raise NotFound(f"workspace {workspace_id} not found")
        if archived:
            raise Conflict(f"workspace {workspace_id} is archived; unarchive it or choose another")

    def create(self, user_id: int, name: Any, workspace_id: int, fields: dict[str, Any]) -> ModelRecord:
        name = check_name(name)
        fields = check_values(fields)
        now = self._clock.now()
        with self._engine.begin() as conn:
            self._check_workspace_open(conn, workspace_id)
            if store.model_named(conn, name) is not None:
                raise Conflict(f"a model named {name!r} already exists; choose another name")
            store.insert_model(conn, {
                "name": name, "description": fields.get("description", ""), "labels": fields.get("labels", []),
                "meta": fields.get("metadata", {}), "notes": fields.get("notes", ""),
                "workspace_id": workspace_id, "user_id": user_id, "archived": False,
                "created_at": now, "updated_at": now})
        return self.get(name)

    def search(self, *, visible: frozenset[int] | None, name: str | None = None,
             description: str | None = None, labels: list[str] | None = None,
             users: list[str] | None = None, user_ids: list[int] | None = None,
             workspace_ids: list[int] | None = None, workspace_names: list[str] | None = None,
             archived: bool | None = None, model_id: int | None = None, sort_by: str = "",
             descending: bool = False, offset: int = 0, limit: int = 0,
             ) -> tuple[list[ModelRecord], int, int]:
        """Models the caller may see (``visible``: workspace ids, None for all) matching every
        filter given; returns (page, total, the page's start). A negative offset counts from
        the end. Registries are small: labels are matched and pages cut here, not in SQL."""
        with self._reader.connect() as conn:
            records = store.models(conn, visible=visible, name=name, description=description, users=users,
                                   user_ids=user_ids, workspace_ids=workspace_ids,
                                   workspace_names=workspace_names, archived=archived, model_id=model_id)
        if labels:
            records = [r for r in records if set(labels) <= set(r.labels)]
        key = _SORT.get(sort_by)
        if key is not None and key != "version":
            records.sort(key=lambda r: (getattr(r, key), r.id))
        if descending:
            records.reverse()
        return _page(records, offset, limit)

    def update(self, model: ModelRecord, fields: dict[str, Any]) -> ModelRecord:
        """Change name, description, labels, metadata or notes (``v1PatchModel``)."""
        values = {("meta" if k == "metadata" else k): v
                  for k, v in check_values(fields, stored=model).items()}
        if not values:
            return model
        with self._engine.begin() as conn:
            if values.get("name", model.name) != model.name and store.model_named(conn, values["name"]) is not None:
                raise Conflict(f"a model named {values['name']!r} already exists; choose another name")
            store.update_model(conn, model.id, {"updated_at": self._clock.now(), **values})
        if "name" in values:
            self._on_change()
        return self.get(model.id)

    def set_archived(self, model: ModelRecord, archived: bool) -> None:
        with self._engine.begin() as conn:
            store.update_model(conn, model.id, {"archived": archived, "updated_at": self._clock.now()})

    def move(self, model: ModelRecord, workspace_id: int) -> None:
        with self._engine.begin() as conn:
            self._check_workspace_open(conn, workspace_id)
            store.update_model(conn, model.id, {"workspace_id": workspace_id, "updated_at": self._clock.now()})
        self._on_change()

    def delete(self, model: ModelRecord) -> None:
        """Delete the model and its versions (their checkpoints stay)."""
        with self._engine.begin() as conn:
            store.delete_model(conn, model.id)
        self._on_change()

    def labels(self, visible: frozenset[int] | None, workspace_id: int | None = None) -> list[str]:
        """Every label of the models the caller may see, most used first."""
        counts: dict[str, int] = {}
        with self._reader.connect() as conn:
            for labels in store.labels_of_models(conn, visible, workspace_id):
                for label in labels or []:
                    counts[label] = counts.get(label, 0) + 1
        return sorted(counts, key=lambda x: (-counts[x], x))

    # -- versions -------------------------------------------------------------------------

    def register(self, model: ModelRecord, user_id: int, checkpoint_uuid: str,
                 fields: dict[str, Any]) -> VersionRecord:
        """Make the checkpoint the model's next version; 409 unless it is COMPLETED and the
        model is not archived."""
        fields = check_values(fields, version=True)
        now = self._clock.now()
        with self._engine.begin() as conn:
            # Lock the model (numbers versions one at a time) and the checkpoint (a concurrent
            # deletion either waits for this version or is seen as having happened).
            archived = store.lock_model(conn, model.id)
            if archived is None:
                raise NotFound(f"model {model.name} not found")
            if archived:
                raise Conflict(f"model {model.name} is archived and takes no new versions; "
                               f"unarchive it first (det model unarchive {model.name})")
            if not store.lock_completed_checkpoint(conn, checkpoint_uuid):
                state = store.checkpoint_state(conn, checkpoint_uuid)
                if state is None:
                    raise NotFound(f"checkpoint {checkpoint_uuid} not found")
                raise Conflict(f"checkpoint {checkpoint_uuid} is {state}: only a COMPLETED checkpoint "
                               "(all its files present) can be registered as a model version")
            version = store.last_version(conn, model.id) + 1
            store.insert_version(conn, {
                "model_id": model.id, "version": version, "checkpoint_uuid": checkpoint_uuid,
                "name": fields.get("name", ""), "comment": fields.get("comment", ""),
                "labels": fields.get("labels", []), "meta": fields.get("metadata", {}),
                "notes": fields.get("notes", ""), "user_id": user_id, "created_at": now, "updated_at": now})
            store.update_model(conn, model.id, {"updated_at": now})
        return self.version(self.get(model.id), version)

    def versions(self, model: ModelRecord, *, sort_by: str = "", descending: bool = False,
                 offset: int = 0, limit: int = 0) -> tuple[list[VersionRecord], int, int]:
        with self._reader.connect() as conn:
            records = store.versions(conn, model, by_creation=_SORT.get(sort_by) == "created_at")
        if descending:
            records.reverse()
        return _page(records, offset, limit)

    def version(self, model: ModelRecord, number: int) -> VersionRecord:
        with self._reader.connect() as conn:
            found = store.version(conn, model, number)
        if found is None:
            raise NotFound(f"model {model.name} has no version {number}")
        return found

    def update_version(self, model: ModelRecord, number: int, fields: dict[str, Any]) -> VersionRecord:
        """Change a version's name, comment, labels, metadata or notes."""
        current = self.version(model, number)
        values = {("meta" if k == "metadata" else k): v
                  for k, v in check_values(fields, version=True, stored=current).items()}
        if values:
            with self._engine.begin() as conn:
                store.update_version(conn, model.id, number, {"updated_at": self._clock.now(), **values})
        return self.version(model, number)

    def delete_version(self, model: ModelRecord, number: int) -> None:
        with self._engine.begin() as conn:
            deleted = store.delete_version(conn, model.id, number)
        if not deleted:
            raise NotFound(f"model {model.name} has no version {number}")


def _page(items: list, offset: int, limit: int) -> tuple[list, int, int]:
    total = len(items)
    start = max(0, total + offset) if offset < 0 else min(offset, total)
    end = total if limit <= 0 else min(total, start + limit)
    return items[start:end], total, start
