"""The workspaces store: workspaces, projects and pins, read as ``WorkspaceRecord`` and
``ProjectRecord``, and the deletes of what a workspace or project holds.

Every function takes an open ``sa.Connection`` (the caller chooses the transaction) and plain
values; none checks names or raises domain errors (``services.workspaces`` does). ``values``
dicts name the tables' columns. Lists of ids are deleted in chunks, so thousands stay within
every backend's parameter limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from . import _tables as t

_CHUNK = 500  # ids per IN (...) list: well under SQLite's and PostgreSQL's limits
_ACTIVE = "ACTIVE"  # an experiment's state while it runs


def _chunks(items: Sequence[Any]) -> Iterable[list[Any]]:
    for i in range(0, len(items), _CHUNK):
        yield list(items[i:i + _CHUNK])


@dataclass(frozen=True)
class WorkspaceRecord:
    id: int
    name: str
    archived: bool
    immutable: bool
    user_id: int
    username: str
    num_projects: int
    num_experiments: int
    pinned_at: float | None


@dataclass(frozen=True)
class ProjectRecord:
    id: int
    name: str
    key: str
    description: str
    workspace_id: int
    workspace_name: str
    archived: bool
    immutable: bool
    user_id: int
    username: str
    notes: tuple[tuple[str, str], ...]
    num_experiments: int
    num_active_experiments: int
    num_runs: int
    last_experiment_started_at: float | None


def offset_window(offset: int, limit: int, total: int) -> tuple[int, int]:
    """Determined's paging: a negative offset counts from the end; limit 0 means all."""
    if offset < 0:
        offset = max(total + offset, 0)
    return offset, limit


# -- lists ------------------------------------------------------------------------------------


def _workspace_records(conn: sa.Connection, rows: list[Any]) -> list[WorkspaceRecord]:
    ids = [r.id for r in rows]
    if not ids:
        return []
    n_projects: dict[int, int] = dict(conn.execute(
        sa.select(t.projects.c.workspace_id, sa.func.count()).where(t.projects.c.workspace_id.in_(ids))
        .group_by(t.projects.c.workspace_id)).all())
    n_exps: dict[int, int] = dict(conn.execute(
        sa.select(t.projects.c.workspace_id, sa.func.count())
        .join(t.experiments, t.experiments.c.project_id == t.projects.c.id)
        .where(t.projects.c.workspace_id.in_(ids)).group_by(t.projects.c.workspace_id)).all())
    return [WorkspaceRecord(r.id, r.name, bool(r.archived), bool(r.immutable), r.user_id, r.username,
                            n_projects.get(r.id, 0), n_exps.get(r.id, 0), r.pinned_at) for r in rows]


def _workspace_query(user_id: int) -> sa.Select:
    pins = t.workspace_pins
    return (sa.select(t.workspaces, t.users.c.username, pins.c.pinned_at)
            .join(t.users, t.users.c.id == t.workspaces.c.user_id)
            .outerjoin(pins, sa.and_(pins.c.workspace_id == t.workspaces.c.id, pins.c.user_id == user_id)))


def _project_query() -> sa.Select:
    last = (sa.select(sa.func.max(t.experiments.c.start_time))
            .where(t.experiments.c.project_id == t.projects.c.id).scalar_subquery())
    return (sa.select(t.projects, t.users.c.username, t.workspaces.c.name.label("workspace_name"),
                      last.label("last_started"))
            .join(t.users, t.users.c.id == t.projects.c.user_id)
            .join(t.workspaces, t.workspaces.c.id == t.projects.c.workspace_id))


def _project_records(conn: sa.Connection, rows: list[Any]) -> list[ProjectRecord]:
    ids = [r.id for r in rows]
    if not ids:
        return []
    e = t.experiments.c
    counts = {r.project_id: r for r in conn.execute(
        sa.select(e.project_id, sa.func.count().label("n"),
                  sa.func.sum(sa.case((e.state == _ACTIVE, 1), else_=0)).label("active"))
        .where(e.project_id.in_(ids)).group_by(e.project_id)).all()}
    runs: dict[int, int] = dict(conn.execute(
        sa.select(e.project_id, sa.func.count())
        .join(t.trials, t.trials.c.experiment_id == e.id)
        .where(e.project_id.in_(ids)).group_by(e.project_id)).all())
    out = []
    for r in rows:
        c = counts.get(r.id)
        notes = tuple((str(n.get("name", "")), str(n.get("contents", "")))
                      for n in (r.notes or []) if isinstance(n, dict))
        out.append(ProjectRecord(
            r.id, r.name, r.key or "", r.description or "", r.workspace_id, r.workspace_name,
            bool(r.archived), bool(r.immutable), r.user_id, r.username, notes,
            int(c.n) if c else 0, int(c.active or 0) if c else 0, runs.get(r.id, 0), r.last_started))
    return out


def _user_filter(query: sa.Select, owner_col: sa.ColumnElement, users: list[str] | None,
                 user_ids: list[int] | None) -> sa.Select:
    if users:
        query = query.where(t.users.c.username.in_(users))
    if user_ids:
        query = query.where(owner_col.in_(user_ids))
    return query


def _page(conn: sa.Connection, query: sa.Select, order: Sequence[sa.ColumnElement[Any]], offset: int,
          limit: int) -> tuple[list[Any], int]:
    total = conn.execute(sa.select(sa.func.count()).select_from(query.subquery())).scalar_one()
    offset, limit = offset_window(offset, limit, total)
    query = query.order_by(*order)
    if offset:
        query = query.offset(offset)
    if limit:
        query = query.limit(limit)
    return list(conn.execute(query).all()), total


def list_workspaces(conn: sa.Connection, user_id: int, *, ids: Iterable[int] | None = None,
                    name: str | None = None, exact_name: str | None = None, archived: bool | None = None,
                    users: list[str] | None = None, user_ids: list[int] | None = None,
                    pinned: bool | None = None, sort: str = "id", descending: bool = False,
                    offset: int = 0, limit: int = 0) -> tuple[list[WorkspaceRecord], int]:
    """A page of workspaces (pins as ``user_id``'s) and the total that match: among ``ids``
    (None: all); ``name`` in any case, ``exact_name``, ``archived``, ``pinned``, owners' names
    ``users`` and ids ``user_ids`` where given. Sorted by the column ``sort`` then id; paged by
    ``offset_window``."""
    w = t.workspaces.c
    q = _workspace_query(user_id)
    if ids is not None:
        q = q.where(w.id.in_(sorted(ids)))
    if name:
        q = q.where(sa.func.lower(w.name) == name.lower())
    if exact_name:
        q = q.where(w.name == exact_name)
    if archived is not None:
        q = q.where(w.archived.is_(archived))
    if pinned is not None:
        pinned_col = t.workspace_pins.c.pinned_at
        q = q.where(pinned_col.is_not(None) if pinned else pinned_col.is_(None))
    q = _user_filter(q, w.user_id, users, user_ids)
    col = w[sort]
    order = [col.desc() if descending else col, w.id]
    rows, total = _page(conn, q, order, offset, limit)
    return _workspace_records(conn, rows), total


def workspace_record(conn: sa.Connection, ws_id: int, user_id: int) -> WorkspaceRecord | None:
    """The workspace (pinned as ``user_id``'s); None: no such workspace."""
    rows = conn.execute(_workspace_query(user_id).where(t.workspaces.c.id == ws_id)).all()
    found = _workspace_records(conn, list(rows))
    return found[0] if found else None


def list_projects(conn: sa.Connection, *, workspace_id: int = 0, workspace_ids: Iterable[int] | None = None,
                  name: str | None = None, archived: bool | None = None, users: list[str] | None = None,
                  user_ids: list[int] | None = None, sort: str = "id", descending: bool = False,
                  offset: int = 0, limit: int = 0) -> tuple[list[ProjectRecord], int]:
    """A page of projects and the total that match: of ``workspace_id`` (0: any), in
    ``workspace_ids`` (None: any); ``name`` in any case, ``archived``, owners' names ``users``
    and ids ``user_ids`` where given. Sorted by the column ``sort`` (or ``last_started``, the
    latest experiment's start) then id; paged by ``offset_window``."""
    p = t.projects.c
    q = _project_query()
    if workspace_id:
        q = q.where(p.workspace_id == workspace_id)
    if workspace_ids is not None:
        q = q.where(p.workspace_id.in_(sorted(workspace_ids)))
    if name:
        q = q.where(sa.func.lower(p.name) == name.lower())
    if archived is not None:
        q = q.where(p.archived.is_(archived))
    q = _user_filter(q, p.user_id, users, user_ids)
    col = sa.literal_column("last_started") if sort == "last_started" else p[sort]
    order = [col.desc() if descending else col, p.id]
    rows, total = _page(conn, q, order, offset, limit)
    return _project_records(conn, rows), total


def project_record(conn: sa.Connection, project_id: int) -> ProjectRecord | None:
    """The project; None: no such project."""
    found = _project_records(conn, list(conn.execute(_project_query().where(t.projects.c.id == project_id))))
    return found[0] if found else None


# -- rows -------------------------------------------------------------------------------------


def workspace(conn: sa.Connection, ws_id: int) -> sa.Row | None:
    """The workspace's row (None: no such workspace)."""
    return conn.execute(sa.select(t.workspaces).where(t.workspaces.c.id == ws_id)).first()


def project(conn: sa.Connection, project_id: int) -> sa.Row | None:
    """The project's row (None: no such project)."""
    return conn.execute(sa.select(t.projects).where(t.projects.c.id == project_id)).first()


def workspace_named(conn: sa.Connection, name: str) -> bool:
    """Whether a workspace of that name exists."""
    return conn.execute(sa.select(t.workspaces.c.id).where(t.workspaces.c.name == name)).first() is not None


def project_named(conn: sa.Connection, ws_id: int, name: str) -> bool:
    """Whether the workspace has a project of that name."""
    return conn.execute(sa.select(t.projects.c.id).where(
        t.projects.c.workspace_id == ws_id, t.projects.c.name == name)).first() is not None


def project_by_names(conn: sa.Connection, ws_name: str, project_name: str, *,
                     workspace_ids: Iterable[int] | None = None) -> int | None:
    """The id of the project of that name in the workspace of that name, among
    ``workspace_ids`` (None: any); None: there is none."""
    p = t.projects.c
    q = (sa.select(p.id).join(t.workspaces, t.workspaces.c.id == p.workspace_id)
         .where(t.workspaces.c.name == ws_name, p.name == project_name))
    if workspace_ids is not None:
        q = q.where(p.workspace_id.in_(sorted(workspace_ids)))
    return conn.execute(q).scalar()


def workspace_of_project(conn: sa.Connection, project_id: int) -> int | None:
    """The project's workspace (None: no such project)."""
    return conn.execute(sa.select(t.projects.c.workspace_id).where(t.projects.c.id == project_id)).scalar()


def project_keys(conn: sa.Connection) -> set[str]:
    """Every project key in use."""
    return set(conn.execute(sa.select(t.projects.c.key).where(t.projects.c.key.is_not(None))).scalars())


def insert_workspace(conn: sa.Connection, name: str, user_id: int) -> int:
    """Store a mutable, unarchived workspace; its new id."""
    return conn.execute(sa.insert(t.workspaces).values(
        name=name, immutable=False, archived=False, user_id=user_id)
        .returning(t.workspaces.c.id)).scalar_one()


def update_workspace(conn: sa.Connection, ws_id: int, **values: Any) -> None:
    """Set the workspace's columns named in ``values``."""
    conn.execute(sa.update(t.workspaces).where(t.workspaces.c.id == ws_id).values(**values))


def set_pin(conn: sa.Connection, ws_id: int, user_id: int, pinned_at: float | None) -> None:
    """Pin the workspace for the user at ``pinned_at``; None: unpin."""
    pins = t.workspace_pins
    conn.execute(sa.delete(pins).where(pins.c.workspace_id == ws_id, pins.c.user_id == user_id))
    if pinned_at is not None:
        conn.execute(sa.insert(pins).values(workspace_id=ws_id, user_id=user_id, pinned_at=pinned_at))


def insert_project(conn: sa.Connection, **values: Any) -> int:
    """Store a project; its new id."""
    return conn.execute(sa.insert(t.projects).values(**values).returning(t.projects.c.id)).scalar_one()


def update_project(conn: sa.Connection, project_id: int, **values: Any) -> None:
    """Set the project's columns named in ``values``."""
    conn.execute(sa.update(t.projects).where(t.projects.c.id == project_id).values(**values))


# -- what a delete removes ----------------------------------------------------------------------


def running_task(conn: sa.Connection, ws_id: int) -> str | None:
    """One of the workspace's interactive tasks that has not ended (None: none)."""
    return conn.execute(sa.select(t.commands.c.task_id).where(
        t.commands.c.workspace_id == ws_id, t.commands.c.end_time.is_(None)).limit(1)).scalar()


def projects_of(conn: sa.Connection, ws_id: int) -> list[int]:
    """The ids of the workspace's projects."""
    return list(conn.execute(sa.select(t.projects.c.id).where(t.projects.c.workspace_id == ws_id)).scalars())


def experiments_of(conn: sa.Connection, project_ids: Sequence[int]) -> list[int]:
    """The ids of the projects' experiments."""
    return list(conn.execute(sa.select(t.experiments.c.id)
                             .where(t.experiments.c.project_id.in_(project_ids))).scalars())


def delete_projects(conn: sa.Connection, project_ids: Sequence[int]) -> None:
    """Delete the projects' rows (their experiments must be gone)."""
    conn.execute(sa.delete(t.projects).where(t.projects.c.id.in_(project_ids)))


def delete_models(conn: sa.Connection, ws_id: int) -> None:
    """Delete the workspace's models with their versions."""
    model_ids = list(conn.execute(sa.select(t.models.c.id).where(t.models.c.workspace_id == ws_id)).scalars())
    for ids in _chunks(model_ids):
        conn.execute(sa.delete(t.model_versions).where(t.model_versions.c.model_id.in_(ids)))
    conn.execute(sa.delete(t.models).where(t.models.c.workspace_id == ws_id))


def delete_templates(conn: sa.Connection, ws_id: int) -> None:
    """Delete the workspace's templates."""
    conn.execute(sa.delete(t.templates).where(t.templates.c.workspace_id == ws_id))


def delete_tasks(conn: sa.Connection, ws_id: int) -> None:
    """Delete the workspace's notebooks, shells, commands and TensorBoards with their logs,
    allocations and jobs (whether they ended is the caller's to check)."""
    tasks = list(conn.execute(sa.select(t.commands.c.task_id, t.commands.c.job_id)
                              .where(t.commands.c.workspace_id == ws_id)).all())
    for batch in _chunks(tasks):
        ids = [r.task_id for r in batch]
        conn.execute(sa.delete(t.task_logs).where(t.task_logs.c.task_id.in_(ids)))
        conn.execute(sa.delete(t.allocations).where(t.allocations.c.task_id.in_(ids)))
        conn.execute(sa.delete(t.commands).where(t.commands.c.task_id.in_(ids)))
        conn.execute(sa.delete(t.jobs).where(t.jobs.c.job_id.in_([r.job_id for r in batch])))


def delete_workspace(conn: sa.Connection, ws_id: int) -> None:
    """Delete the workspace's row with its role assignments and pins (what it holds must be gone)."""
    conn.execute(sa.delete(t.role_assignments).where(t.role_assignments.c.workspace_id == ws_id))
    conn.execute(sa.delete(t.workspace_pins).where(t.workspace_pins.c.workspace_id == ws_id))
    conn.execute(sa.delete(t.workspaces).where(t.workspaces.c.id == ws_id))
