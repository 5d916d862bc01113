"""Role assignments in the database, each user's Grants, and where objects live.

The master is one process and every write goes through it, so Grants and object→workspace
lookups are cached in memory and the cache is dropped on every write that could change them
(an assignment, a group membership, a user's admin flag, a move). Nothing is ever served from
a cache after the write that invalidates it returns.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ...errors import Conflict, InvalidRequest, NotFound
from ...store import groups as groups_store
from ...store import rbac as store
from ...store import reader
from ..accounts.auth import User
from .authz import ROLES, Grants, Perm, check_role

UNCATEGORIZED = 1


@dataclass(frozen=True)
class Assignment:
    id: int
    role: str
    user_id: int | None
    group_id: int | None
    workspace_id: int | None



class RbacService:
    def __init__(self, engine: sa.Engine, default_role: str = "Editor") -> None:
        if default_role and default_role not in ROLES:
            raise ValueError(f"default_user_role {default_role!r} is not a role; roles are {', '.join(ROLES)}")
        self._engine = engine
        self._reader = reader(engine)
        self.default_role = default_role
        self._lock = threading.Lock()
        self._grants: dict[int, Grants] = {}
        self._where: dict[tuple[str, object], int] = {}
        self._trial_of_task: dict[str, int] = {}  # a trial task's trial: its for good

    # -- caches ---------------------------------------------------------------------------

    def invalidate(self) -> None:
        """Forget every cached Grants and object location (call after any write to them)."""
        with self._lock:
            self._grants.clear()
            self._where.clear()
            self._trial_of_task.clear()

    def _remember(self, cache: dict, key: object, value: int) -> None:
        """Keep a location (a cache grown past 100,000 entries starts over)."""
        with self._lock:
            if len(cache) > 100_000:
                cache.clear()
            cache[key] = value

    def grants(self, user: User) -> Grants:
        hit = self._grants.get(user.id)
        if hit is not None:
            return hit
        with self._reader.connect() as conn:
            rows = store.grant_rows(conn, user.id)
            admin = store.is_admin(conn, user.id)
        grants = Grants.build([(r.role, r.workspace_id) for r in rows], admin=bool(admin))
        with self._lock:
            self._grants[user.id] = grants
        return grants

    # -- where objects live ----------------------------------------------------------------

    def _lookup(self, kind: str, key: Any, query: Callable[[sa.Connection, Any], int | None]) -> int:
        """``query`` (a ``store.rbac`` lookup) builds its statement only on a miss: building it
        cost more than the hit."""
        hit = self._where.get((kind, key))
        if hit is not None:
            return hit
        with self._reader.connect() as conn:
            ws = query(conn, key)
        if ws is None:
            raise NotFound(f"{kind} {key} not found")
        self._remember(self._where, (kind, key), ws)
        return ws

    def workspace_of_project(self, project_id: int) -> int:
        return self._lookup("project", project_id, store.workspace_of_project)

    def workspace_of_experiment(self, experiment_id: int) -> int:
        return self._lookup("experiment", experiment_id, store.workspace_of_experiment)

    def workspace_of_trial(self, trial_id: int) -> int:
        return self._lookup("trial", trial_id, store.workspace_of_trial)

    def workspace_of_checkpoint(self, uuid: str) -> int:
        """A checkpoint lives where its experiment does."""
        return self._lookup("checkpoint", uuid, store.workspace_of_checkpoint)

    def workspace_of_task(self, task_id: str) -> int:
        """An interactive task's workspace, or its trial's experiment's for a trial task."""
        # An interactive task's workspace is its own for good (no move changes it); a trial
        # task's trial is kept, and its workspace looked up as any trial's (moves invalidate
        # that one).
        ws = self._where.get(("task", task_id))
        if ws is not None:
            return ws
        trial = self._trial_of_task.get(task_id)
        if trial is None:
            with self._reader.connect() as conn:  # both kinds in one round trip
                ws, trial = store.task_location(conn, task_id)
            if ws is not None:
                self._remember(self._where, ("task", task_id), ws)
                return ws
            if trial is None:
                raise NotFound(f"task {task_id} not found")
            self._remember(self._trial_of_task, task_id, trial)
        return self.workspace_of_trial(trial)

    def workspaces_of_jobs(self, job_ids: list[str]) -> dict[str, tuple[int, bool]]:
        """Each job's workspace (an experiment's project's, or an interactive task's) and
        whether it is an experiment's."""
        if not job_ids:
            return {}
        with self._reader.connect() as conn:
            return store.workspaces_of_jobs(conn, job_ids)

    def workspace_of_model(self, name: str) -> int:
        return self._lookup("model", name, store.workspace_of_model)

    def workspace_of_template(self, name: str) -> int:
        return self._lookup("template", name, store.workspace_of_template)

    def check_workspace(self, grants: Grants, perm: Perm, workspace_id: int) -> None:
        """Like Grants.check, but a workspace that does not exist is also 404."""
        grants.check(perm, workspace_id, f"workspace {workspace_id}")
        with self._reader.connect() as conn:
            if not store.workspace_exists(conn, workspace_id):
                raise NotFound(f"workspace {workspace_id} not found")

    # -- assignments ----------------------------------------------------------------------

    def assign(self, conn: sa.Connection | None, role: str, *, user_id: int | None = None,
               group_id: int | None = None, workspace_id: int | None = None) -> None:
        """Give ``role`` (idempotent). ValueError-free: bad input is InvalidRequest / NotFound."""
        if (user_id is None) == (group_id is None):
            raise InvalidRequest("a role is assigned to exactly one of a user or a group")
        try:
            check_role(role, on_workspace=workspace_id is not None)
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None
        if conn is None:
            with self._engine.begin() as c:
                self._assign(c, role, user_id, group_id, workspace_id)
        else:
            self._assign(conn, role, user_id, group_id, workspace_id)
        self.invalidate()

    def _assign(self, conn: sa.Connection, role: str, user_id: int | None, group_id: int | None,
                workspace_id: int | None) -> None:
        if user_id is not None and not store.user_exists(conn, user_id):
            raise NotFound(f"user {user_id} not found")
        if group_id is not None and not groups_store.exists(conn, group_id):
            raise NotFound(f"group {group_id} not found")
        if workspace_id is not None and not store.workspace_exists(conn, workspace_id):
            raise NotFound(f"workspace {workspace_id} not found")
        store.add_assignment(conn, role, user_id, group_id, workspace_id)
        if role == "ClusterAdmin" and user_id is not None:
            store.set_admin(conn, user_id, True)

    def unassign(self, role: str, *, user_id: int | None = None, group_id: int | None = None,
                 workspace_id: int | None = None) -> None:
        with self._engine.begin() as conn:
            n = store.delete_assignment(conn, role, user_id, group_id, workspace_id)
            if role == "ClusterAdmin" and user_id is not None:
                if store.username(conn, user_id) == "admin":
                    raise Conflict("the built-in admin keeps ClusterAdmin")
                store.set_admin(conn, user_id, False)
                n = max(n, 1)
        self.invalidate()
        if n == 0:
            raise NotFound(f"no assignment of {role} to that user or group on that scope")

    def assignments(self, *, user_id: int | None = None, group_id: int | None = None,
                    workspace_id: int | None = None, any_scope: bool = True) -> list[Assignment]:
        with self._reader.connect() as conn:
            rows = store.assignments(conn, user_id=user_id, group_id=group_id, workspace_id=workspace_id,
                                     any_scope=any_scope)
        return [Assignment(r.id, r.role, r.user_id, r.group_id, r.workspace_id) for r in rows]

    def groups_of_user(self, user_id: int) -> list[int]:
        with self._reader.connect() as conn:
            return groups_store.of_user(conn, user_id)

    def group_name(self, group_id: int) -> str:
        with self._reader.connect() as conn:
            return groups_store.name(conn, group_id) or ""

    # -- hooks ----------------------------------------------------------------------------

    def on_user_created(self, conn: sa.Connection, user_id: int, *, admin: bool) -> None:
        """A new user gets the default role on Uncategorized (an admin gets ClusterAdmin)."""
        if admin:
            self._assign(conn, "ClusterAdmin", user_id, None, None)
        elif self.default_role and store.workspace_exists(conn, UNCATEGORIZED):
            self._assign(conn, self.default_role, user_id, None, UNCATEGORIZED)
        self.invalidate()

    def on_workspace_created(self, conn: sa.Connection, workspace_id: int, user_id: int) -> None:
        """The creator of a workspace becomes its WorkspaceAdmin."""
        self._assign(conn, "WorkspaceAdmin", user_id, None, workspace_id)
        self.invalidate()

    def seed_existing_users(self, conn: sa.Connection) -> None:
        """On a database that had users before roles: each gets the default role (admins get
        ClusterAdmin), once — a user with any assignment is left alone."""
        have = store.assigned_users(conn)
        for uid, admin in store.users_and_admin(conn):
            if uid not in have:
                self.on_user_created(conn, uid, admin=bool(admin))
