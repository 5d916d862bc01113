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

import sqlalchemy as sa

from ...errors import Conflict, InvalidRequest, NotFound
from ...store import reader
from ...store import tables as t
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


# A task's workspace (an interactive task's) or trial (a trial task's), in one statement.
_TASK_LOCATION = sa.select(
    sa.select(t.commands.c.workspace_id).where(t.commands.c.task_id == sa.bindparam("target")).scalar_subquery(),
    sa.select(t.trials.c.id).where(t.trials.c.task_id == sa.bindparam("target")).scalar_subquery(),
)


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
            rows = conn.execute(
                sa.select(t.role_assignments.c.role, t.role_assignments.c.workspace_id)
                .where(sa.or_(
                    t.role_assignments.c.user_id == user.id,
                    t.role_assignments.c.group_id.in_(
                        sa.select(t.group_members.c.group_id).where(t.group_members.c.user_id == user.id)),
                ))
            ).all()
            admin = conn.execute(sa.select(t.users.c.admin).where(t.users.c.id == user.id)).scalar()
        grants = Grants.build([(r.role, r.workspace_id) for r in rows], admin=bool(admin))
        with self._lock:
            self._grants[user.id] = grants
        return grants

    # -- where objects live ----------------------------------------------------------------

    def _lookup(self, kind: str, key: object, query: Callable[[], sa.Select]) -> int:
        """``query()`` builds the statement only on a miss: building it cost more than the hit."""
        hit = self._where.get((kind, key))
        if hit is not None:
            return hit
        with self._reader.connect() as conn:
            ws = conn.execute(query()).scalar()
        if ws is None:
            raise NotFound(f"{kind} {key} not found")
        self._remember(self._where, (kind, key), ws)
        return ws

    def workspace_of_project(self, project_id: int) -> int:
        return self._lookup("project", project_id, lambda: sa.select(t.projects.c.workspace_id)
                            .where(t.projects.c.id == project_id))

    def workspace_of_experiment(self, experiment_id: int) -> int:
        return self._lookup("experiment", experiment_id, lambda: sa.select(t.projects.c.workspace_id)
                            .join(t.experiments, t.experiments.c.project_id == t.projects.c.id)
                            .where(t.experiments.c.id == experiment_id))

    def workspace_of_trial(self, trial_id: int) -> int:
        return self._lookup("trial", trial_id, lambda: sa.select(t.projects.c.workspace_id)
                            .join(t.experiments, t.experiments.c.project_id == t.projects.c.id)
                            .join(t.trials, t.trials.c.experiment_id == t.experiments.c.id)
                            .where(t.trials.c.id == trial_id))

    def workspace_of_checkpoint(self, uuid: str) -> int:
        """A checkpoint lives where its experiment does."""
        return self._lookup("checkpoint", uuid, lambda: sa.select(t.projects.c.workspace_id)
                            .join(t.experiments, t.experiments.c.project_id == t.projects.c.id)
                            .join(t.checkpoints, t.checkpoints.c.experiment_id == t.experiments.c.id)
                            .where(t.checkpoints.c.uuid == uuid))

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
                ws, trial = conn.execute(_TASK_LOCATION, {"target": task_id}).one()
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
            out = {j: (ws, True) for j, ws in conn.execute(
                sa.select(t.experiments.c.job_id, t.projects.c.workspace_id)
                .join(t.projects, t.projects.c.id == t.experiments.c.project_id)
                .where(t.experiments.c.job_id.in_(job_ids)))}
            out.update({j: (ws, False) for j, ws in conn.execute(
                sa.select(t.commands.c.job_id, t.commands.c.workspace_id)
                .where(t.commands.c.job_id.in_(job_ids)))})
        return out

    def workspace_of_model(self, name: str) -> int:
        return self._lookup("model", name, lambda: sa.select(t.models.c.workspace_id).where(t.models.c.name == name))

    def workspace_of_template(self, name: str) -> int:
        return self._lookup("template", name, lambda: sa.select(t.templates.c.workspace_id)
                            .where(t.templates.c.name == name))

    def check_workspace(self, grants: Grants, perm: Perm, workspace_id: int) -> None:
        """Like Grants.check, but a workspace that does not exist is also 404."""
        grants.check(perm, workspace_id, f"workspace {workspace_id}")
        with self._reader.connect() as conn:
            if conn.execute(sa.select(t.workspaces.c.id).where(t.workspaces.c.id == workspace_id)).first() is None:
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
        if user_id is not None and conn.execute(sa.select(t.users.c.id).where(t.users.c.id == user_id)).first() is None:
            raise NotFound(f"user {user_id} not found")
        if group_id is not None and conn.execute(
                sa.select(t.user_groups.c.id).where(t.user_groups.c.id == group_id)).first() is None:
            raise NotFound(f"group {group_id} not found")
        if workspace_id is not None and conn.execute(
                sa.select(t.workspaces.c.id).where(t.workspaces.c.id == workspace_id)).first() is None:
            raise NotFound(f"workspace {workspace_id} not found")
        ra = t.role_assignments.c
        exists = conn.execute(sa.select(ra.id).where(
            ra.role == role, _eq(ra.user_id, user_id), _eq(ra.group_id, group_id),
            _eq(ra.workspace_id, workspace_id))).first()
        if exists is None:
            conn.execute(sa.insert(t.role_assignments).values(
                role=role, user_id=user_id, group_id=group_id, workspace_id=workspace_id))
        if role == "ClusterAdmin" and user_id is not None:
            conn.execute(sa.update(t.users).where(t.users.c.id == user_id).values(admin=True))

    def unassign(self, role: str, *, user_id: int | None = None, group_id: int | None = None,
                 workspace_id: int | None = None) -> None:
        ra = t.role_assignments.c
        with self._engine.begin() as conn:
            n = conn.execute(sa.delete(t.role_assignments).where(
                ra.role == role, _eq(ra.user_id, user_id), _eq(ra.group_id, group_id),
                _eq(ra.workspace_id, workspace_id))).rowcount
            if role == "ClusterAdmin" and user_id is not None:
                if conn.execute(sa.select(t.users.c.username).where(t.users.c.id == user_id)).scalar() == "admin":
                    raise Conflict("the built-in admin keeps ClusterAdmin")
                conn.execute(sa.update(t.users).where(t.users.c.id == user_id).values(admin=False))
                n = max(n, 1)
        self.invalidate()
        if n == 0:
            raise NotFound(f"no assignment of {role} to that user or group on that scope")

    def assignments(self, *, user_id: int | None = None, group_id: int | None = None,
                    workspace_id: int | None = None, any_scope: bool = True) -> list[Assignment]:
        ra = t.role_assignments.c
        q = sa.select(t.role_assignments).order_by(ra.id)
        if user_id is not None:
            q = q.where(ra.user_id == user_id)
        if group_id is not None:
            q = q.where(ra.group_id == group_id)
        if not any_scope or workspace_id is not None:
            q = q.where(_eq(ra.workspace_id, workspace_id))
        with self._reader.connect() as conn:
            return [Assignment(r.id, r.role, r.user_id, r.group_id, r.workspace_id) for r in conn.execute(q)]

    def groups_of_user(self, user_id: int) -> list[int]:
        with self._reader.connect() as conn:
            return list(conn.execute(sa.select(t.group_members.c.group_id)
                                     .where(t.group_members.c.user_id == user_id)).scalars())

    def group_name(self, group_id: int) -> str:
        with self._reader.connect() as conn:
            return conn.execute(sa.select(t.user_groups.c.name)
                                .where(t.user_groups.c.id == group_id)).scalar() or ""

    # -- hooks ----------------------------------------------------------------------------

    def on_user_created(self, conn: sa.Connection, user_id: int, *, admin: bool) -> None:
        """A new user gets the default role on Uncategorized (an admin gets ClusterAdmin)."""
        if admin:
            self._assign(conn, "ClusterAdmin", user_id, None, None)
        elif self.default_role and conn.execute(
                sa.select(t.workspaces.c.id).where(t.workspaces.c.id == UNCATEGORIZED)).first():
            self._assign(conn, self.default_role, user_id, None, UNCATEGORIZED)
        self.invalidate()

    def on_workspace_created(self, conn: sa.Connection, workspace_id: int, user_id: int) -> None:
        """The creator of a workspace becomes its WorkspaceAdmin."""
        self._assign(conn, "WorkspaceAdmin", user_id, None, workspace_id)
        self.invalidate()

    def seed_existing_users(self, conn: sa.Connection) -> None:
        """On a database that had users before roles: each gets the default role (admins get
        ClusterAdmin), once — a user with any assignment is left alone."""
        have = set(conn.execute(sa.select(t.role_assignments.c.user_id)
                                .where(t.role_assignments.c.user_id.is_not(None))).scalars())
        for uid, admin in conn.execute(sa.select(t.users.c.id, t.users.c.admin)).all():
            if uid not in have:
                self.on_user_created(conn, uid, admin=bool(admin))


def _eq(col: sa.ColumnElement, value: object) -> sa.ColumnElement[bool]:
    return col.is_(None) if value is None else col == value
