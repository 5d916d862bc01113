"""The model registry's store: models (with their owner's name, their workspace's name and
their number of versions) and their numbered versions, read as ``ModelRecord`` and
``VersionRecord``.

Every function takes an open ``sa.Connection`` (the caller chooses the transaction) and plain
values; none checks names or raises domain errors (``services.registry`` does). ``values``
dicts name the tables' columns (a model's or version's metadata is the ``meta`` column).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from . import _tables as t


@dataclass(frozen=True)
class ModelRecord:
    """A registered model, as the API shows it."""

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
    """A model's numbered version: a checkpoint, named and described."""

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


# -- models ---------------------------------------------------------------------------------


def _models_query() -> sa.Select:
    m = t.models.c
    count = (sa.select(sa.func.count()).where(t.model_versions.c.model_id == m.id)
             .correlate(t.models).scalar_subquery())
    return (sa.select(t.models, t.users.c.username, t.workspaces.c.name.label("workspace_name"),
                      count.label("num_versions"))
            .join(t.users, t.users.c.id == m.user_id)
            .join(t.workspaces, t.workspaces.c.id == m.workspace_id))


def _model_record(r: Any) -> ModelRecord:
    return ModelRecord(r.id, r.name, r.description or "", list(r.labels or []), dict(r.meta or {}),
                       r.notes or "", r.workspace_id, r.user_id, r.username, bool(r.archived),
                       r.created_at, r.updated_at, int(r.num_versions or 0), r.workspace_name)


def model(conn: sa.Connection, identifier: int | str) -> ModelRecord | None:
    """The model of that id (an int) or name (a str); None: there is none."""
    m = t.models.c
    cond = m.id == identifier if isinstance(identifier, int) else m.name == identifier
    row = conn.execute(_models_query().where(cond)).first()
    return None if row is None else _model_record(row)


def models(conn: sa.Connection, *, visible: Collection[int] | None = None, name: str | None = None,
           description: str | None = None, users: list[str] | None = None, user_ids: list[int] | None = None,
           workspace_ids: list[int] | None = None, workspace_names: list[str] | None = None,
           archived: bool | None = None, model_id: int | None = None) -> list[ModelRecord]:
    """The models matching every filter given, by id: in the ``visible`` workspaces (None:
    any), whose name or description contains ``name`` or ``description`` (any case), of
    those users (by name or id), workspaces (by id or name), archived or not, of that id."""
    m = t.models.c
    q = _models_query()
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
    return [_model_record(r) for r in conn.execute(q.order_by(m.id))]


def model_named(conn: sa.Connection, name: str) -> int | None:
    """The id of the model of that name (None: there is none)."""
    return conn.execute(sa.select(t.models.c.id).where(t.models.c.name == name)).scalar()


def workspace_named(conn: sa.Connection, name: str) -> int | None:
    """The id of the workspace of that name (None: there is none)."""
    return conn.execute(sa.select(t.workspaces.c.id).where(t.workspaces.c.name == name)).scalar()


def workspace_archived(conn: sa.Connection, workspace_id: int) -> bool | None:
    """Whether the workspace is archived (None: there is no such workspace)."""
    return conn.execute(sa.select(t.workspaces.c.archived).where(t.workspaces.c.id == workspace_id)).scalar()


def insert_model(conn: sa.Connection, values: dict[str, Any]) -> None:
    """Store a new model (``values``: its columns)."""
    conn.execute(sa.insert(t.models).values(**values))


def update_model(conn: sa.Connection, model_id: int, values: dict[str, Any]) -> None:
    """Set the model's columns in ``values``."""
    conn.execute(sa.update(t.models).where(t.models.c.id == model_id).values(**values))


def delete_model(conn: sa.Connection, model_id: int) -> None:
    """Delete the model and its versions (their checkpoints stay)."""
    conn.execute(sa.delete(t.model_versions).where(t.model_versions.c.model_id == model_id))
    conn.execute(sa.delete(t.models).where(t.models.c.id == model_id))


def labels_of_models(conn: sa.Connection, visible: Collection[int] | None,
                     workspace_id: int | None = None) -> list[list[str] | None]:
    """Each model's labels, of the models in the ``visible`` workspaces (None: any) and in
    ``workspace_id`` where given."""
    q = sa.select(t.models.c.labels)
    if visible is not None:
        q = q.where(t.models.c.workspace_id.in_(sorted(visible)))
    if workspace_id:
        q = q.where(t.models.c.workspace_id == workspace_id)
    return list(conn.execute(q).scalars())


# -- versions -------------------------------------------------------------------------------


def lock_model(conn: sa.Connection, model_id: int) -> bool | None:
    """Lock the model's row until the transaction ends (its versions are numbered one at a
    time); whether it is archived (None: there is no such model)."""
    return conn.execute(sa.select(t.models.c.archived).where(t.models.c.id == model_id).with_for_update()).scalar()


def lock_completed_checkpoint(conn: sa.Connection, uuid: str) -> bool:
    """Lock the checkpoint's row where it is COMPLETED (a concurrent deletion then waits for
    this transaction); whether it is."""
    ck = t.checkpoints.c
    return bool(conn.execute(sa.update(t.checkpoints).where(
        ck.uuid == uuid, ck.state == "COMPLETED").values(state=ck.state)).rowcount)


def checkpoint_state(conn: sa.Connection, uuid: str) -> str | None:
    """The checkpoint's state (None: there is no such checkpoint)."""
    return conn.execute(sa.select(t.checkpoints.c.state).where(t.checkpoints.c.uuid == uuid)).scalar()


def last_version(conn: sa.Connection, model_id: int) -> int:
    """The model's highest version number (0: it has none)."""
    mv = t.model_versions.c
    return conn.execute(sa.select(sa.func.max(mv.version)).where(mv.model_id == model_id)).scalar() or 0


def insert_version(conn: sa.Connection, values: dict[str, Any]) -> None:
    """Store a new version (``values``: its columns)."""
    conn.execute(sa.insert(t.model_versions).values(**values))


def _versions_query(model_id: int) -> sa.Select:
    return (sa.select(t.model_versions, t.users.c.username)
            .join(t.users, t.users.c.id == t.model_versions.c.user_id)
            .where(t.model_versions.c.model_id == model_id))


def _version_record(model: ModelRecord, r: Any) -> VersionRecord:
    return VersionRecord(r.id, model, r.version, r.checkpoint_uuid, r.name or "", r.comment or "",
                         list(r.labels or []), dict(r.meta or {}), r.notes or "", r.user_id,
                         r.username, r.created_at, r.updated_at)


def versions(conn: sa.Connection, model: ModelRecord, *, by_creation: bool = False) -> list[VersionRecord]:
    """The model's versions, by number (``by_creation``: by creation time)."""
    mv = t.model_versions.c
    order = mv.created_at if by_creation else mv.version
    return [_version_record(model, r) for r in conn.execute(_versions_query(model.id).order_by(order, mv.id))]


def version(conn: sa.Connection, model: ModelRecord, number: int) -> VersionRecord | None:
    """The model's version of that number (None: there is none)."""
    row = conn.execute(_versions_query(model.id).where(t.model_versions.c.version == number)).first()
    return None if row is None else _version_record(model, row)


def update_version(conn: sa.Connection, model_id: int, number: int, values: dict[str, Any]) -> None:
    """Set the version's columns in ``values``."""
    mv = t.model_versions.c
    conn.execute(sa.update(t.model_versions).where(mv.model_id == model_id, mv.version == number).values(**values))


def delete_version(conn: sa.Connection, model_id: int, number: int) -> bool:
    """Delete the version; whether there was one."""
    mv = t.model_versions.c
    return bool(conn.execute(sa.delete(t.model_versions).where(mv.model_id == model_id, mv.version == number)).rowcount)
