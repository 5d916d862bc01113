"""The model registry: named models in workspaces, and their numbered versions, each a
checkpoint.

A model is looked up by name or by numeric id (names are never all digits, so the two never
collide). Versions are numbered 1, 2, … per model, in the order they are registered; only a
COMPLETED checkpoint can become one, and a checkpoint a version uses is never deleted
(``checkpoint_gc``). An archived model takes no new versions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ...errors import Conflict, InvalidRequest, NotFound
from ...store import reader
from ...store import tables as t
from ..common import names as _names
from ..common.clock import Clock

UNCATEGORIZED = 1
MAX_NAME = 255  # characters in a model or version name
_SORT = {"SORT_BY_NAME": "name", "SORT_BY_DESCRIPTION": "description",
         "SORT_BY_CREATION_TIME": "created_at", "SORT_BY_LAST_UPDATED_TIME": "updated_at",
         "SORT_BY_NUM_VERSIONS": "num_versions", "SORT_BY_WORKSPACE": "workspace_name",
         "SORT_BY_VERSION": "version"}


@dataclass(frozen=True)
class ModelRecord:
    id: int
    name: str
    description: str
    labels: list[str]
    metadata: dict[str, Any]
    notes: str
    workspace_id: int
    user_id: int
    username: str
    archived: bool
    created_at: float
    updated_at: float
    num_versions: int
    workspace_name: str = ""


@dataclass(frozen=True)
class VersionRecord:
    id: int
    model: ModelRecord
    version: int
    checkpoint_uuid: str
    name: str
    comment: str
    labels: list[str]
    metadata: dict[str, Any]
    notes: str
    user_id: int
    username: str
    created_at: float
    updated_at: float


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
    def __init__(self, engine: sa.Engine, clock: Clock,
                 on_change: Callable[[], None] = lambda: None) -> None:
        self._engine = engine
        self._reader = reader(engine)
        self._clock = clock
        self._on_change = on_change  # where models live changed: authorization caches drop

    # -- models ---------------------------------------------------------------------------

    def _models_query(self) -> sa.Select:
        m = t.models.c
        count = (sa.select(sa.func.count()).where(t.model_versions.c.model_id == m.id)
                 .correlate(t.models).scalar_subquery())
        return (sa.select(t.models, t.users.c.username, t.workspaces.c.name.label("workspace_name"),
                          count.label("num_versions"))
                .join(t.users, t.users.c.id == m.user_id)
                .join(t.workspaces, t.workspaces.c.id == m.workspace_id))

    @staticmethod
    def _record(r: Any) -> ModelRecord:
        return ModelRecord(r.id, r.name, r.description or "", list(r.labels or []), dict(r.meta or {}),
                           r.notes or "", r.workspace_id, r.user_id, r.username, bool(r.archived),
                           r.created_at, r.updated_at, int(r.num_versions or 0), r.workspace_name)

    def get(self, identifier: str | int) -> ModelRecord:
        """The model named ``identifier``, or whose id it is (all digits)."""
        ident = str(identifier)
        cond = t.models.c.id == int(ident) if ident.isdigit() else t.models.c.name == ident
        with self._reader.connect() as conn:
            row = conn.execute(self._models_query().where(cond)).first()
        if row is None:
            raise NotFound(f"model {ident} not found")
        return self._record(row)

    def workspace_id(self, *, workspace_id: Any = None, workspace_name: Any = None) -> int:
        """The workspace a request names (by id or by name), Uncategorized if neither."""
        if workspace_name not in (None, ""):
            if not isinstance(workspace_name, str):
                raise InvalidRequest("workspaceName must be a string")
            with self._reader.connect() as conn:
                found = conn.execute(sa.select(t.workspaces.c.id)
                                     .where(t.workspaces.c.name == workspace_name)).scalar()
            if found is None:
                raise NotFound(f"workspace {workspace_name!r} not found")
            return int(found)
        if workspace_id in (None, 0):
            return UNCATEGORIZED
        if not isinstance(workspace_id, int) or isinstance(workspace_id, bool):
            raise InvalidRequest("workspaceId must be an integer")
        return workspace_id

    def _check_workspace_open(self, conn: sa.Connection, workspace_id: int) -> None:
        archived = conn.execute(sa.select(t.workspaces.c.archived)
                                .where(t.workspaces.c.id == workspace_id)).scalar()
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
            if conn.execute(sa.select(t.models.c.id).where(t.models.c.name == name)).first():
                raise Conflict(f"a model named {name!r} already exists; choose another name")
            conn.execute(sa.insert(t.models).values(
                name=name, description=fields.get("description", ""), labels=fields.get("labels", []),
                meta=fields.get("metadata", {}), notes=fields.get("notes", ""),
                workspace_id=workspace_id, user_id=user_id, archived=False,
                created_at=now, updated_at=now))
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
        m = t.models.c
        q = self._models_query()
        if visible is not None:
            q = q.where(m.workspace_id.in_(sorted(visible)))
        if name:
            q = q.where(sa.func.lower(m.name).contains(name.lower(), autoescape=True))
        if description:
            q = q.where(sa.func.lower(m.description).contains(description.lower(), autoescape=True))
        if users:
            q = q.where(t.users.c.username.in_(users))
        if user_ids:
            q = q.where(m.user_id.in_(user_ids))
        if workspace_ids:
            q = q.where(m.workspace_id.in_(workspace_ids))
        if workspace_names:
            q = q.where(t.workspaces.c.name.in_(workspace_names))
        if archived is not None:
            q = q.where(m.archived.is_(archived))
        if model_id:
            q = q.where(m.id == model_id)
        with self._reader.connect() as conn:
            records = [self._record(r) for r in conn.execute(q.order_by(m.id))]
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
            if values.get("name", model.name) != model.name and conn.execute(
                    sa.select(t.models.c.id).where(t.models.c.name == values["name"])).first():
                raise Conflict(f"a model named {values['name']!r} already exists; choose another name")
            conn.execute(sa.update(t.models).where(t.models.c.id == model.id)
                         .values(updated_at=self._clock.now(), **values))
        if "name" in values:
            self._on_change()
        return self.get(model.id)

    def set_archived(self, model: ModelRecord, archived: bool) -> None:
        with self._engine.begin() as conn:
            conn.execute(sa.update(t.models).where(t.models.c.id == model.id)
                         .values(archived=archived, updated_at=self._clock.now()))

    def move(self, model: ModelRecord, workspace_id: int) -> None:
        with self._engine.begin() as conn:
            self._check_workspace_open(conn, workspace_id)
            conn.execute(sa.update(t.models).where(t.models.c.id == model.id)
                         .values(workspace_id=workspace_id, updated_at=self._clock.now()))
        self._on_change()

    def delete(self, model: ModelRecord) -> None:
        """Delete the model and its versions (their checkpoints stay)."""
        with self._engine.begin() as conn:
            conn.execute(sa.delete(t.model_versions).where(t.model_versions.c.model_id == model.id))
            conn.execute(sa.delete(t.models).where(t.models.c.id == model.id))
        self._on_change()

    def labels(self, visible: frozenset[int] | None, workspace_id: int | None = None) -> list[str]:
        """Every label of the models the caller may see, most used first."""
        q = sa.select(t.models.c.labels)
        if visible is not None:
            q = q.where(t.models.c.workspace_id.in_(sorted(visible)))
        if workspace_id:
            q = q.where(t.models.c.workspace_id == workspace_id)
        counts: dict[str, int] = {}
        with self._reader.connect() as conn:
            for labels in conn.execute(q).scalars():
                for label in labels or []:
                    counts[label] = counts.get(label, 0) + 1
        return sorted(counts, key=lambda x: (-counts[x], x))

    # -- versions -------------------------------------------------------------------------

    def register(self, model: ModelRecord, user_id: int, checkpoint_uuid: str,
                 fields: dict[str, Any]) -> VersionRecord:
        """Make the checkpoint the model's next version; 409 unless it is COMPLETED and the
        model is not archived."""
        ck, mv = t.checkpoints.c, t.model_versions.c
        fields = check_values(fields, version=True)
        now = self._clock.now()
        with self._engine.begin() as conn:
            # Lock the model (numbers versions one at a time) and the checkpoint (a concurrent
            # deletion either waits for this version or is seen as having happened).
            archived = conn.execute(sa.select(t.models.c.archived).where(t.models.c.id == model.id)
                                    .with_for_update()).scalar()
            if archived is None:
                raise NotFound(f"model {model.name} not found")
            if archived:
                raise Conflict(f"model {model.name} is archived and takes no new versions; "
                               f"unarchive it first (det model unarchive {model.name})")
            locked = conn.execute(sa.update(t.checkpoints).where(
                ck.uuid == checkpoint_uuid, ck.state == "COMPLETED").values(state=ck.state)).rowcount
            if not locked:
                state = conn.execute(sa.select(ck.state).where(ck.uuid == checkpoint_uuid)).scalar()
                if state is None:
                    raise NotFound(f"checkpoint {checkpoint_uuid} not found")
                raise Conflict(f"checkpoint {checkpoint_uuid} is {state}: only a COMPLETED checkpoint "
                               "(all its files present) can be registered as a model version")
            version = (conn.execute(sa.select(sa.func.max(mv.version)).where(mv.model_id == model.id))
                       .scalar() or 0) + 1
            conn.execute(sa.insert(t.model_versions).values(
                model_id=model.id, version=version, checkpoint_uuid=checkpoint_uuid,
                name=fields.get("name", ""), comment=fields.get("comment", ""),
                labels=fields.get("labels", []), meta=fields.get("metadata", {}),
                notes=fields.get("notes", ""), user_id=user_id, created_at=now, updated_at=now))
            conn.execute(sa.update(t.models).where(t.models.c.id == model.id).values(updated_at=now))
        return self.version(self.get(model.id), version)

    def _versions_query(self, model: ModelRecord) -> sa.Select:
        return (sa.select(t.model_versions, t.users.c.username)
                .join(t.users, t.users.c.id == t.model_versions.c.user_id)
                .where(t.model_versions.c.model_id == model.id))

    @staticmethod
    def _version_record(model: ModelRecord, r: Any) -> VersionRecord:
        return VersionRecord(r.id, model, r.version, r.checkpoint_uuid, r.name or "", r.comment or "",
                             list(r.labels or []), dict(r.meta or {}), r.notes or "", r.user_id,
                             r.username, r.created_at, r.updated_at)

    def versions(self, model: ModelRecord, *, sort_by: str = "", descending: bool = False,
                 offset: int = 0, limit: int = 0) -> tuple[list[VersionRecord], int, int]:
        mv = t.model_versions.c
        order = mv.created_at if _SORT.get(sort_by) == "created_at" else mv.version
        with self._reader.connect() as conn:
            rows = conn.execute(self._versions_query(model).order_by(order, mv.id)).all()
        records = [self._version_record(model, r) for r in rows]
        if descending:
            records.reverse()
        return _page(records, offset, limit)

    def version(self, model: ModelRecord, number: int) -> VersionRecord:
        with self._reader.connect() as conn:
            row = conn.execute(self._versions_query(model)
                               .where(t.model_versions.c.version == number)).first()
        if row is None:
            raise NotFound(f"model {model.name} has no version {number}")
        return self._version_record(model, row)

    def update_version(self, model: ModelRecord, number: int, fields: dict[str, Any]) -> VersionRecord:
        """Change a version's name, comment, labels, metadata or notes."""
        current = self.version(model, number)
        values = {("meta" if k == "metadata" else k): v
                  for k, v in check_values(fields, version=True, stored=current).items()}
        if values:
            with self._engine.begin() as conn:
                conn.execute(sa.update(t.model_versions).where(
                    t.model_versions.c.model_id == model.id, t.model_versions.c.version == number)
                    .values(updated_at=self._clock.now(), **values))
        return self.version(model, number)

    def delete_version(self, model: ModelRecord, number: int) -> None:
        with self._engine.begin() as conn:
            n = conn.execute(sa.delete(t.model_versions).where(
                t.model_versions.c.model_id == model.id, t.model_versions.c.version == number)).rowcount
        if not n:
            raise NotFound(f"model {model.name} has no version {number}")


def _page(items: list, offset: int, limit: int) -> tuple[list, int, int]:
    total = len(items)
    start = max(0, total + offset) if offset < 0 else min(offset, total)
    end = total if limit <= 0 else min(total, start + limit)
    return items[start:end], total, start
