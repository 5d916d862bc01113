"""The access store: role assignments (``role_assignments``), what they grant a user, and the
workspace each kind of object lives in.

Every function takes an open ``sa.Connection`` (the caller chooses the transaction) and plain
values; none checks roles or raises domain errors, and none caches (``services.access.rbac``
does both). A lookup's statement is built when it is called, so a caller that answers from
its cache builds none.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from . import _tables as t

# A task's workspace (an interactive task's) or trial (a trial task's), in one statement.
_TASK_LOCATION = sa.select(
    sa.select(t.commands.c.workspace_id).where(t.commands.c.task_id == sa.bindparam("target")).scalar_subquery(),
    sa.select(t.trials.c.id).where(t.trials.c.task_id == sa.bindparam("target")).scalar_subquery(),
)


def _eq(col: sa.ColumnElement, value: object) -> sa.ColumnElement[bool]:
    return col.is_(None) if value is None else col == value


# -- grants -----------------------------------------------------------------------------------


def grant_rows(conn: sa.Connection, user_id: int) -> list[sa.Row]:
    """The user's assignments (``role``, ``workspace_id``), their own and their groups'."""
    return list(conn.execute(
        sa.select(t.role_assignments.c.role, t.role_assignments.c.workspace_id)
        .where(sa.or_(
            t.role_assignments.c.user_id == user_id,
            t.role_assignments.c.group_id.in_(
                sa.select(t.group_members.c.group_id).where(t.group_members.c.user_id == user_id)),
        ))
    ).all())


def is_admin(conn: sa.Connection, user_id: int) -> bool | None:
    """The user's admin flag (None: no such user)."""
    return conn.execute(sa.select(t.users.c.admin).where(t.users.c.id == user_id)).scalar()


# -- where objects live -------------------------------------------------------------------------


def workspace_of_project(conn: sa.Connection, project_id: int) -> int | None:
    """The project's workspace (None: no such project)."""
    return conn.execute(sa.select(t.projects.c.workspace_id).where(t.projects.c.id == project_id)).scalar()


def workspace_of_experiment(conn: sa.Connection, experiment_id: int) -> int | None:
    """The experiment's project's workspace (None: no such experiment)."""
    return conn.execute(sa.select(t.projects.c.workspace_id)
                        .join(t.experiments, t.experiments.c.project_id == t.projects.c.id)
                        .where(t.experiments.c.id == experiment_id)).scalar()


def workspace_of_trial(conn: sa.Connection, trial_id: int) -> int | None:
    """The trial's experiment's workspace (None: no such trial)."""
    return conn.execute(sa.select(t.projects.c.workspace_id)
                        .join(t.experiments, t.experiments.c.project_id == t.projects.c.id)
                        .join(t.trials, t.trials.c.experiment_id == t.experiments.c.id)
                        .where(t.trials.c.id == trial_id)).scalar()


def workspace_of_checkpoint(conn: sa.Connection, uuid: str) -> int | None:
    """The checkpoint's experiment's workspace (None: no such checkpoint, or no experiment)."""
    return conn.execute(sa.select(t.projects.c.workspace_id)
                        .join(t.experiments, t.experiments.c.project_id == t.projects.c.id)
                        .join(t.checkpoints, t.checkpoints.c.experiment_id == t.experiments.c.id)
                        .where(t.checkpoints.c.uuid == uuid)).scalar()


def workspace_of_model(conn: sa.Connection, name: str) -> int | None:
    """The workspace of the model of that name (None: there is none)."""
    return conn.execute(sa.select(t.models.c.workspace_id).where(t.models.c.name == name)).scalar()


def workspace_of_template(conn: sa.Connection, name: str) -> int | None:
    """The workspace of the template of that name (None: there is none)."""
    return conn.execute(sa.select(t.templates.c.workspace_id).where(t.templates.c.name == name)).scalar()


def task_location(conn: sa.Connection, task_id: str) -> tuple[int | None, int | None]:
    """An interactive task's workspace and a trial task's trial (each None when the task is not
    of that kind; both: no such task). One statement, built once."""
    ws, trial = conn.execute(_TASK_LOCATION, {"target": task_id}).one()
    return ws, trial


def workspaces_of_jobs(conn: sa.Connection, job_ids: Sequence[str]) -> dict[str, tuple[int, bool]]:
    """Each job's workspace (an experiment's project's, or an interactive task's) and whether it
    is an experiment's; a job of neither is left out."""
    out = {j: (ws, True) for j, ws in conn.execute(
        sa.select(t.experiments.c.job_id, t.projects.c.workspace_id)
        .join(t.projects, t.projects.c.id == t.experiments.c.project_id)
        .where(t.experiments.c.job_id.in_(job_ids)))}
    out.update({j: (ws, False) for j, ws in conn.execute(
        sa.select(t.commands.c.job_id, t.commands.c.workspace_id)
        .where(t.commands.c.job_id.in_(job_ids)))})
    return out


def workspace_exists(conn: sa.Connection, workspace_id: int) -> bool:
    """Whether the workspace exists."""
    return conn.execute(sa.select(t.workspaces.c.id)
                        .where(t.workspaces.c.id == workspace_id)).first() is not None


def user_exists(conn: sa.Connection, user_id: int) -> bool:
    """Whether the user exists."""
    return conn.execute(sa.select(t.users.c.id).where(t.users.c.id == user_id)).first() is not None


def username(conn: sa.Connection, user_id: int) -> str | None:
    """The user's name (None: no such user)."""
    return conn.execute(sa.select(t.users.c.username).where(t.users.c.id == user_id)).scalar()


# -- assignments ----------------------------------------------------------------------------------


def add_assignment(conn: sa.Connection, role: str, user_id: int | None, group_id: int | None,
                   workspace_id: int | None) -> None:
    """Store the assignment unless it is stored already."""
    ra = t.role_assignments.c
    found = conn.execute(sa.select(ra.id).where(
        ra.role == role, _eq(ra.user_id, user_id), _eq(ra.group_id, group_id),
        _eq(ra.workspace_id, workspace_id))).first()
    if found is None:
        conn.execute(sa.insert(t.role_assignments).values(
            role=role, user_id=user_id, group_id=group_id, workspace_id=workspace_id))


def delete_assignment(conn: sa.Connection, role: str, user_id: int | None, group_id: int | None,
                      workspace_id: int | None) -> int:
    """Delete the assignment; how many rows went (0 or 1)."""
    ra = t.role_assignments.c
    return conn.execute(sa.delete(t.role_assignments).where(
        ra.role == role, _eq(ra.user_id, user_id), _eq(ra.group_id, group_id),
        _eq(ra.workspace_id, workspace_id))).rowcount


def set_admin(conn: sa.Connection, user_id: int, admin: bool) -> None:
    """Set the user's admin flag."""
    conn.execute(sa.update(t.users).where(t.users.c.id == user_id).values(admin=admin))


def assignments(conn: sa.Connection, *, user_id: int | None, group_id: int | None,
                workspace_id: int | None, any_scope: bool) -> list[sa.Row]:
    """The ``role_assignments`` rows, by id: of ``user_id`` and of ``group_id`` where given; on
    ``workspace_id`` (None: cluster-wide) unless ``any_scope`` and it is None."""
    ra = t.role_assignments.c
    q = sa.select(t.role_assignments).order_by(ra.id)
    if user_id is not None:
        q = q.where(ra.user_id == user_id)
    if group_id is not None:
        q = q.where(ra.group_id == group_id)
    if not any_scope or workspace_id is not None:
        q = q.where(_eq(ra.workspace_id, workspace_id))
    return list(conn.execute(q))


def assigned_users(conn: sa.Connection) -> set[int]:
    """The users that have an assignment of their own."""
    return set(conn.execute(sa.select(t.role_assignments.c.user_id)
                            .where(t.role_assignments.c.user_id.is_not(None))).scalars())


def users_and_admin(conn: sa.Connection) -> list[sa.Row]:
    """Every user's ``id`` and ``admin`` flag."""
    return list(conn.execute(sa.select(t.users.c.id, t.users.c.admin)).all())
