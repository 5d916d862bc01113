"""Workspaces and projects: create, list, edit, archive, pin, move, delete.

Rules (Determined 0.38.1's): the Uncategorized workspace and project (id 1) are immutable;
workspace names are unique, project names unique within their workspace; an archived
workspace takes no new projects and an archived project (or one in an archived workspace) no
new experiments, but archiving changes nothing inside; deleting a project or workspace deletes
everything in it — refused while any experiment in it has not ended.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from ...errors import Conflict, InvalidRequest, NotFound
from ...store import reader
from ...store import tables as t
from ..access.rbac import RbacService
from ..common.clock import Clock
from ..experiments import purge as _purge
from .rows import (
    ProjectRecord,
    WorkspaceRecord,
    check_key,
    check_name,
    check_note,
    check_notes,
    key_candidates,
    page,
    project_query,
    project_records,
    user_filter,
    workspace_query,
    workspace_records,
)

UNCATEGORIZED = 1
_SORT_WS = {"SORT_BY_NAME": "name"}
_SORT_PROJECT = {"SORT_BY_NAME": "name", "SORT_BY_DESCRIPTION": "description",
                 "SORT_BY_CREATION_TIME": "created_at", "SORT_BY_LAST_EXPERIMENT_START_TIME": "last_started"}


class WorkspaceService:
    def __init__(self, engine: sa.Engine, clock: Clock, rbac: RbacService, cluster_id: str,
                 on_deleted: Callable[[], None] = lambda: None) -> None:
        self._engine = engine
        self._reader = reader(engine)
        self._clock = clock
        self._rbac = rbac
        self._cluster_id = cluster_id
        self._on_deleted = on_deleted  # drop caches keyed by ids that may now be reused

    # -- workspaces: reads ------------------------------------------------------------------

    def list_workspaces(self, user_id: int, *, visible: frozenset[int] | None, name: str | None = None,
                        exact_name: str | None = None, archived: bool | None = None,
                        users: list[str] | None = None, user_ids: list[int] | None = None,
                        pinned: bool | None = None, sort: str = "", descending: bool = False,
                        offset: int = 0, limit: int = 0) -> tuple[list[WorkspaceRecord], int]:
        w = t.workspaces.c
        q = workspace_query(user_id)
        if visible is not None:
            q = q.where(w.id.in_(sorted(visible)))
        if name:
            q = q.where(sa.func.lower(w.name) == name.lower())
        if exact_name:
            q = q.where(w.name == exact_name)
        if archived is not None:
            q = q.where(w.archived.is_(archived))
        if pinned is not None:
            pinned_col = t.workspace_pins.c.pinned_at
            q = q.where(pinned_col.is_not(None) if pinned else pinned_col.is_(None))
        q = user_filter(q, w.user_id, users, user_ids)
        col = w[_SORT_WS.get(sort, "id")]
        order = [col.desc() if descending else col, w.id]
        with self._reader.connect() as conn:
            rows, total = page(conn, q, order, offset, limit)
            return workspace_records(conn, rows), total

    def get_workspace(self, ws_id: int, user_id: int) -> WorkspaceRecord:
        with self._reader.connect() as conn:
            rows = conn.execute(workspace_query(user_id).where(t.workspaces.c.id == ws_id)).all()
            found = workspace_records(conn, list(rows))
        if not found:
            raise NotFound(f"workspace {ws_id} not found")
        return found[0]

    # -- workspaces: writes -------------------------------------------------------------------

    def create_workspace(self, user_id: int, name: Any) -> int:
        """A new workspace whose creator becomes its WorkspaceAdmin (one transaction)."""
        name = check_name(name, "workspace")
        with self._engine.begin() as conn:
            self._unique_workspace_name(conn, name)
            ws_id = conn.execute(sa.insert(t.workspaces).values(
                name=name, immutable=False, archived=False, user_id=user_id)
                .returning(t.workspaces.c.id)).scalar_one()
            self._rbac.on_workspace_created(conn, ws_id, user_id)
        return ws_id

    def rename_workspace(self, ws_id: int, name: Any) -> None:
        name = check_name(name, "workspace")
        with self._engine.begin() as conn:
            ws = self._mutable_workspace(conn, ws_id, "edit")
            if ws.archived:
                raise Conflict(f"workspace {ws.name!r} is archived; unarchive it before editing it")
            if name != ws.name:
                self._unique_workspace_name(conn, name)
                conn.execute(sa.update(t.workspaces).where(t.workspaces.c.id == ws_id).values(name=name))

    def set_workspace_archived(self, ws_id: int, archived: bool) -> None:
        with self._engine.begin() as conn:
            self._mutable_workspace(conn, ws_id, "archive" if archived else "unarchive")
            conn.execute(sa.update(t.workspaces).where(t.workspaces.c.id == ws_id).values(archived=archived))

    def set_pinned(self, ws_id: int, user_id: int, pinned: bool) -> None:
        """Pin or unpin a workspace for one user (idempotent)."""
        pins = t.workspace_pins
        with self._engine.begin() as conn:
            self._workspace_row(conn, ws_id)
            conn.execute(sa.delete(pins).where(pins.c.workspace_id == ws_id, pins.c.user_id == user_id))
            if pinned:
                conn.execute(sa.insert(pins).values(workspace_id=ws_id, user_id=user_id,
                                                    pinned_at=self._clock.now()))

    def delete_workspace(self, ws_id: int) -> None:
        """Delete the workspace with its projects, experiments (rows and files), models,
        templates, ended tasks and role assignments. Conflict while anything in it runs."""
        with self._engine.begin() as conn:
            self._mutable_workspace(conn, ws_id, "delete")
            live = conn.execute(sa.select(t.commands.c.task_id).where(
                t.commands.c.workspace_id == ws_id, t.commands.c.end_time.is_(None)).limit(1)).scalar()
            if live is not None:
                raise Conflict(f"task {live} in this workspace is still running; kill it first")
            project_ids = list(conn.execute(sa.select(t.projects.c.id)
                                            .where(t.projects.c.workspace_id == ws_id)).scalars())
            model_ids = list(conn.execute(sa.select(t.models.c.id).where(t.models.c.workspace_id == ws_id)).scalars())
            for ids in _purge.chunks(model_ids):  # its own models' versions do not block the delete
                conn.execute(sa.delete(t.model_versions).where(t.model_versions.c.model_id.in_(ids)))
            conn.execute(sa.delete(t.models).where(t.models.c.workspace_id == ws_id))
            doomed = self._purge_projects(conn, project_ids)
            conn.execute(sa.delete(t.templates).where(t.templates.c.workspace_id == ws_id))
            self._delete_tasks(conn, ws_id)
            conn.execute(sa.delete(t.role_assignments).where(t.role_assignments.c.workspace_id == ws_id))
            conn.execute(sa.delete(t.workspace_pins).where(t.workspace_pins.c.workspace_id == ws_id))
            conn.execute(sa.delete(t.workspaces).where(t.workspaces.c.id == ws_id))
        self._deleted(doomed)

    # -- projects: reads ----------------------------------------------------------------------

    def list_projects(self, *, workspace_id: int, visible: frozenset[int] | None, name: str | None = None,
                      archived: bool | None = None, users: list[str] | None = None,
                      user_ids: list[int] | None = None, sort: str = "", descending: bool = False,
                      offset: int = 0, limit: int = 0) -> tuple[list[ProjectRecord], int]:
        """Projects of one workspace (0: of every workspace in ``visible``)."""
        p = t.projects.c
        q = project_query()
        if workspace_id:
            q = q.where(p.workspace_id == workspace_id)
        if visible is not None:
            q = q.where(p.workspace_id.in_(sorted(visible)))
        if name:
            q = q.where(sa.func.lower(p.name) == name.lower())
        if archived is not None:
            q = q.where(p.archived.is_(archived))
        q = user_filter(q, p.user_id, users, user_ids)
        field = _SORT_PROJECT.get(sort)
        col = sa.literal_column("last_started") if field == "last_started" else p[field or "id"]
        order = [col.desc() if descending else col, p.id]
        with self._reader.connect() as conn:
            rows, total = page(conn, q, order, offset, limit)
            return project_records(conn, rows), total

    def get_project(self, project_id: int) -> ProjectRecord:
        with self._reader.connect() as conn:
            found = project_records(conn, list(conn.execute(project_query().where(t.projects.c.id == project_id))))
        if not found:
            raise NotFound(f"project {project_id} not found")
        return found[0]

    def project_for_create(self, project_id: int | None, config: dict, *,
                           visible: frozenset[int] | None = None) -> int:
        """The project a new experiment goes into: ``project_id``, else the config's
        ``workspace`` and ``project`` names, else Uncategorized. Conflict if it (or its
        workspace) is archived. ``visible``: the workspaces whose projects the caller may see
        (None: all); a project elsewhere is "not found", before anything else is said of it."""
        ws_name, p_name = config.get("workspace"), config.get("project")
        p = t.projects.c
        with self._reader.connect() as conn:
            if project_id is None and (ws_name or p_name):
                if not (isinstance(ws_name, str) and ws_name and isinstance(p_name, str) and p_name):
                    raise InvalidRequest("the config names a workspace or a project but not both; set both "
                                         "`workspace:` and `project:` (names), or neither for Uncategorized")
                q = (sa.select(p.id).join(t.workspaces, t.workspaces.c.id == p.workspace_id)
                     .where(t.workspaces.c.name == ws_name, p.name == p_name))
                if visible is not None:
                    q = q.where(p.workspace_id.in_(sorted(visible)))
                project_id = conn.execute(q).scalar()
                if project_id is None:
                    raise NotFound(f"no project {p_name!r} in workspace {ws_name!r}; create it with "
                                   f"`det project create {ws_name!r} {p_name!r}` or fix the config")
            project_id = UNCATEGORIZED if project_id is None else project_id
            ws = conn.execute(sa.select(p.workspace_id).where(p.id == project_id)).scalar()
            if ws is None or (visible is not None and ws not in visible):
                raise NotFound(f"project {project_id} not found")
            self._open_project(conn, project_id, "create experiments in")
        return project_id

    # -- projects: writes ---------------------------------------------------------------------

    def create_project(self, user_id: int, ws_id: int, name: Any, description: Any = None,
                       key: Any = None) -> int:
        name = check_name(name, "project")
        if description is not None and not isinstance(description, str):
            raise InvalidRequest("description must be a string")
        with self._engine.begin() as conn:
            ws = self._workspace_row(conn, ws_id)
            if ws.archived:
                raise Conflict(f"workspace {ws.name!r} is archived; unarchive it to add projects")
            self._unique_project_name(conn, ws_id, name)
            return conn.execute(sa.insert(t.projects).values(
                workspace_id=ws_id, name=name, description=description or "", immutable=False,
                archived=False, user_id=user_id, notes=[], created_at=self._clock.now(),
                key=self._free_key(conn, name, key)).returning(t.projects.c.id)).scalar_one()

    def patch_project(self, project_id: int, *, name: Any = None, description: Any = None,
                      key: Any = None) -> None:
        values: dict[str, Any] = {}
        if description is not None:
            if not isinstance(description, str):
                raise InvalidRequest("description must be a string")
            values["description"] = description
        with self._engine.begin() as conn:
            row = self._mutable_project(conn, project_id, "edit")
            if row.archived:
                raise Conflict(f"project {row.name!r} is archived; unarchive it before editing it")
            # The name it has passes unchecked: names are checked when set, not after.
            if name is not None and name != row.name and (name := check_name(name, "project")) != row.name:
                self._unique_project_name(conn, row.workspace_id, name)
                values["name"] = name
            if key is not None and check_key(key) != row.key:
                values["key"] = self._free_key(conn, row.name, key)
            if values:
                conn.execute(sa.update(t.projects).where(t.projects.c.id == project_id).values(**values))

    def set_project_archived(self, project_id: int, archived: bool) -> None:
        with self._engine.begin() as conn:
            row = self._mutable_project(conn, project_id, "archive" if archived else "unarchive")
            ws = self._workspace_row(conn, row.workspace_id)
            if not archived and ws.archived:
                raise Conflict(f"workspace {ws.name!r} is archived; unarchive it first")
            conn.execute(sa.update(t.projects).where(t.projects.c.id == project_id).values(archived=archived))

    def set_notes(self, project_id: int, notes: Any, *, append: bool) -> list[dict[str, str]]:
        """Replace the notes (or ``append`` one); returns them all."""
        with self._engine.begin() as conn:
            row = self._project_row(conn, project_id)
            new = [*(row.notes or []), check_note(notes)] if append else check_notes(notes)
            conn.execute(sa.update(t.projects).where(t.projects.c.id == project_id).values(notes=new))
        return new

    def move_project(self, project_id: int, dest_ws: int) -> None:
        with self._engine.begin() as conn:
            row = self._mutable_project(conn, project_id, "move")
            ws = self._workspace_row(conn, dest_ws)
            if ws.archived:
                raise Conflict(f"workspace {ws.name!r} is archived; it takes no projects")
            if dest_ws != row.workspace_id:
                self._unique_project_name(conn, dest_ws, row.name)
                conn.execute(sa.update(t.projects).where(t.projects.c.id == project_id)
                             .values(workspace_id=dest_ws))
        self._rbac.invalidate()  # its experiments now live elsewhere

    def delete_project(self, project_id: int) -> None:
        """Delete the project and its experiments (rows and files); Conflict while any runs."""
        with self._engine.begin() as conn:
            self._mutable_project(conn, project_id, "delete")
            doomed = self._purge_projects(conn, [project_id])
        self._deleted(doomed)

    # -- helpers ------------------------------------------------------------------------------

    def _purge_projects(self, conn: sa.Connection, project_ids: list[int]) -> list[_purge.Doomed]:
        doomed: list[_purge.Doomed] = []
        for ids in _purge.chunks(project_ids):
            exp_ids = list(conn.execute(sa.select(t.experiments.c.id)
                                        .where(t.experiments.c.project_id.in_(ids))).scalars())
            _purge.check_deletable(conn, exp_ids)
            doomed += _purge.purge_experiments(conn, exp_ids, self._cluster_id)
            conn.execute(sa.delete(t.projects).where(t.projects.c.id.in_(ids)))
        return doomed

    def _delete_tasks(self, conn: sa.Connection, ws_id: int) -> None:
        """The workspace's ended notebooks, shells, commands and TensorBoards."""
        tasks = list(conn.execute(sa.select(t.commands.c.task_id, t.commands.c.job_id)
                                  .where(t.commands.c.workspace_id == ws_id)).all())
        for batch in _purge.chunks(tasks):
            ids = [r.task_id for r in batch]
            conn.execute(sa.delete(t.task_logs).where(t.task_logs.c.task_id.in_(ids)))
            conn.execute(sa.delete(t.allocations).where(t.allocations.c.task_id.in_(ids)))
            conn.execute(sa.delete(t.commands).where(t.commands.c.task_id.in_(ids)))
            conn.execute(sa.delete(t.jobs).where(t.jobs.c.job_id.in_([r.job_id for r in batch])))

    def _deleted(self, doomed: list[_purge.Doomed]) -> None:
        self._rbac.invalidate()
        self._on_deleted()
        _purge.remove_dirs_soon(doomed)  # the answer does not wait on the disk

    def _workspace_row(self, conn: sa.Connection, ws_id: int) -> Any:
        row = conn.execute(sa.select(t.workspaces).where(t.workspaces.c.id == ws_id)).first()
        if row is None:
            raise NotFound(f"workspace {ws_id} not found")
        return row

    def _mutable_workspace(self, conn: sa.Connection, ws_id: int, verb: str) -> Any:
        row = self._workspace_row(conn, ws_id)
        if row.immutable:
            raise Conflict(f"workspace {row.name!r} is built in; it cannot be {_past(verb)}")
        return row

    def _project_row(self, conn: sa.Connection, project_id: int) -> Any:
        row = conn.execute(sa.select(t.projects).where(t.projects.c.id == project_id)).first()
        if row is None:
            raise NotFound(f"project {project_id} not found")
        return row

    def _mutable_project(self, conn: sa.Connection, project_id: int, verb: str) -> Any:
        row = self._project_row(conn, project_id)
        if row.immutable:
            raise Conflict(f"project {row.name!r} is built in; it cannot be {_past(verb)}")
        return row

    def _open_project(self, conn: sa.Connection, project_id: int, verb: str) -> None:
        """Conflict unless the project and its workspace are unarchived."""
        row = self._project_row(conn, project_id)
        if row.archived:
            raise Conflict(f"project {row.name!r} is archived; unarchive it to {verb} it")
        ws = self._workspace_row(conn, row.workspace_id)
        if ws.archived:
            raise Conflict(f"workspace {ws.name!r} is archived; unarchive it to {verb} its projects")

    def check_open_project(self, project_id: int, verb: str) -> None:
        """Conflict unless experiments may be added to the project (for moves)."""
        with self._reader.connect() as conn:
            self._open_project(conn, project_id, verb)

    def _unique_workspace_name(self, conn: sa.Connection, name: str) -> None:
        if conn.execute(sa.select(t.workspaces.c.id).where(t.workspaces.c.name == name)).first():
            raise Conflict(f"a workspace named {name!r} already exists; choose another name")

    def _unique_project_name(self, conn: sa.Connection, ws_id: int, name: str) -> None:
        if conn.execute(sa.select(t.projects.c.id).where(
                t.projects.c.workspace_id == ws_id, t.projects.c.name == name)).first():
            raise Conflict(f"this workspace already has a project named {name!r}; choose another name")

    def _free_key(self, conn: sa.Connection, name: str, key: Any) -> str:
        """The user's key (Conflict if taken), or the first free one made from the name."""
        taken = set(conn.execute(sa.select(t.projects.c.key).where(t.projects.c.key.is_not(None))).scalars())
        if key is not None:
            key = check_key(key)
            if key in taken:
                raise Conflict(f"project key {key!r} is taken; choose another key")
            return key
        for candidate in key_candidates(name):
            if candidate not in taken:
                return candidate
        raise Conflict(f"no free project key for {name!r}; give one with --key")


def _past(verb: str) -> str:
    return {"edit": "edited", "archive": "archived", "unarchive": "unarchived", "delete": "deleted",
            "move": "moved"}.get(verb, verb)
