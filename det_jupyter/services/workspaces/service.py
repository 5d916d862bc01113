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
from ...store import workspaces as store
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
        with self._reader.connect() as conn:
            return store.list_workspaces(
                conn, user_id, ids=visible, name=name, exact_name=exact_name, archived=archived, users=users,
                user_ids=user_ids, pinned=pinned, sort=_SORT_WS.get(sort, "id"), descending=descending,
                offset=offset, limit=limit)

    def get_workspace(self, ws_id: int, user_id: int) -> WorkspaceRecord:
        with self._reader.connect() as conn:
            found = store.workspace_record(conn, ws_id, user_id)
        if found is None:
            raise NotFound(f"workspace {ws_id} not found")
        return found

    # -- workspaces: writes -------------------------------------------------------------------

    def create_workspace(self, user_id: int, name: Any) -> int:
        """A new workspace whose creator becomes its WorkspaceAdmin (one transaction)."""
        name = check_name(name, "workspace")
        with self._engine.begin() as conn:
            self._unique_workspace_name(conn, name)
            ws_id = store.insert_workspace(conn, name, user_id)
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
                store.update_workspace(conn, ws_id, name=name)

    def set_workspace_archived(self, ws_id: int, archived: bool) -> None:
        with self._engine.begin() as conn:
            self._mutable_workspace(conn, ws_id, "archive" if archived else "unarchive")
            store.update_workspace(conn, ws_id, archived=archived)

    def set_pinned(self, ws_id: int, user_id: int, pinned: bool) -> None:
        """Pin or unpin a workspace for one user (idempotent)."""
        with self._engine.begin() as conn:
            self._workspace_row(conn, ws_id)
            store.set_pin(conn, ws_id, user_id, self._clock.now() if pinned else None)

    def delete_workspace(self, ws_id: int) -> None:
        """Delete the workspace with its projects, experiments (rows and files), models,
        templates, ended tasks and role assignments. Conflict while anything in it runs."""
        with self._engine.begin() as conn:
            self._mutable_workspace(conn, ws_id, "delete")
            live = store.running_task(conn, ws_id)
            if live is not None:
                raise Conflict(f"task {live} in this workspace is still running; kill it first")
            project_ids = store.projects_of(conn, ws_id)
            store.delete_models(conn, ws_id)  # its own models' versions do not block the delete
            doomed = self._purge_projects(conn, project_ids)
            store.delete_templates(conn, ws_id)
            store.delete_tasks(conn, ws_id)  # all ended: ``running_task`` found none
            store.delete_workspace(conn, ws_id)
        self._deleted(doomed)

    # -- projects: reads ----------------------------------------------------------------------

    def list_projects(self, *, workspace_id: int, visible: frozenset[int] | None, name: str | None = None,
                      archived: bool | None = None, users: list[str] | None = None,
                      user_ids: list[int] | None = None, sort: str = "", descending: bool = False,
                      offset: int = 0, limit: int = 0) -> tuple[list[ProjectRecord], int]:
        """Projects of one workspace (0: of every workspace in ``visible``)."""
        with self._reader.connect() as conn:
            return store.list_projects(
                conn, workspace_id=workspace_id, workspace_ids=visible, name=name, archived=archived, users=users,
                user_ids=user_ids, sort=_SORT_PROJECT.get(sort) or "id", descending=descending, offset=offset,
                limit=limit)

    def get_project(self, project_id: int) -> ProjectRecord:
        with self._reader.connect() as conn:
            found = store.project_record(conn, project_id)
        if found is None:
            raise NotFound(f"project {project_id} not found")
        return found

    def project_for_create(self, project_id: int | None, config: dict, *,
                           visible: frozenset[int] | None = None) -> int:
        """The project a new experiment goes into: ``project_id``, else the config's
        ``workspace`` and ``project`` names, else Uncategorized. Conflict if it (or its
        workspace) is archived. ``visible``: the workspaces whose projects the caller may see
        (None: all); a project elsewhere is "not found", before anything else is said of it."""
        ws_name, p_name = config.get("workspace"), config.get("project")
        with self._reader.connect() as conn:
            if project_id is None and (ws_name or p_name):
                if not (isinstance(ws_name, str) and ws_name and isinstance(p_name, str) and p_name):
                    raise InvalidRequest("the config names a workspace or a project but not both; set both "
                                         "`workspace:` and `project:` (names), or neither for Uncategorized")
                project_id = store.project_by_names(conn, ws_name, p_name, workspace_ids=visible)
                if project_id is None:
                    raise NotFound(f"no project {p_name!r} in workspace {ws_name!r}; create it with "
                                   f"`det project create {ws_name!r} {p_name!r}` or fix the config")
            project_id = UNCATEGORIZED if project_id is None else project_id
            ws = store.workspace_of_project(conn, project_id)
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
            return store.insert_project(
                conn, workspace_id=ws_id, name=name, description=description or "", immutable=False,
                archived=False, user_id=user_id, notes=[], created_at=self._clock.now(),
                key=self._free_key(conn, name, key))

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
                store.update_project(conn, project_id, **values)

    def set_project_archived(self, project_id: int, archived: bool) -> None:
        with self._engine.begin() as conn:
            row = self._mutable_project(conn, project_id, "archive" if archived else "unarchive")
            ws = self._workspace_row(conn, row.workspace_id)
            if not archived and ws.archived:
                raise Conflict(f"workspace {ws.name!r} is archived; unarchive it first")
            store.update_project(conn, project_id, archived=archived)

    def set_notes(self, project_id: int, notes: Any, *, append: bool) -> list[dict[str, str]]:
        """Replace the notes (or ``append`` one); returns them all."""
        with self._engine.begin() as conn:
            row = self._project_row(conn, project_id)
            new = [*(row.notes or []), check_note(notes)] if append else check_notes(notes)
            store.update_project(conn, project_id, notes=new)
        return new

    def move_project(self, project_id: int, dest_ws: int) -> None:
        with self._engine.begin() as conn:
            row = self._mutable_project(conn, project_id, "move")
            ws = self._workspace_row(conn, dest_ws)
            if ws.archived:
                raise Conflict(f"workspace {ws.name!r} is archived; it takes no projects")
            if dest_ws != row.workspace_id:
                self._unique_project_name(conn, dest_ws, row.name)
                store.update_project(conn, project_id, workspace_id=dest_ws)
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
            exp_ids = store.experiments_of(conn, ids)
            _purge.check_deletable(conn, exp_ids)
            doomed += _purge.purge_experiments(conn, exp_ids, self._cluster_id)
            store.delete_projects(conn, ids)
        return doomed

    def _deleted(self, doomed: list[_purge.Doomed]) -> None:
        self._rbac.invalidate()
        self._on_deleted()
        _purge.remove_dirs_soon(doomed)  # the answer does not wait on the disk

    def _workspace_row(self, conn: sa.Connection, ws_id: int) -> Any:
        row = store.workspace(conn, ws_id)
        if row is None:
            raise NotFound(f"workspace {ws_id} not found")
        return row

    def _mutable_workspace(self, conn: sa.Connection, ws_id: int, verb: str) -> Any:
        row = self._workspace_row(conn, ws_id)
        if row.immutable:
            raise Conflict(f"workspace {row.name!r} is built in; it cannot be {_past(verb)}")
        return row

    def _project_row(self, conn: sa.Connection, project_id: int) -> Any:
        row = store.project(conn, project_id)
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
        if store.workspace_named(conn, name):
            raise Conflict(f"a workspace named {name!r} already exists; choose another name")

    def _unique_project_name(self, conn: sa.Connection, ws_id: int, name: str) -> None:
        if store.project_named(conn, ws_id, name):
            raise Conflict(f"this workspace already has a project named {name!r}; choose another name")

    def _free_key(self, conn: sa.Connection, name: str, key: Any) -> str:
        """The user's key (Conflict if taken), or the first free one made from the name."""
        taken = store.project_keys(conn)
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
