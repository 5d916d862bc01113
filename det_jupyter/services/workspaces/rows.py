"""Workspaces and projects as the API shows them: records, the list queries, and the pure
rules for names, keys and notes."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ...errors import InvalidRequest
from ...store import tables as t
from ..common import names as _names
from ..common.states import State

MAX_NAME = 80  # characters in a workspace or project name (Determined's limit)
MAX_KEY = 5  # characters in a project key
_KEY = re.compile(r"[A-Za-z0-9]{1,5}")


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


# -- pure rules ---------------------------------------------------------------------------

def check_name(value: Any, what: str) -> str:
    """A workspace or project name, with surrounding spaces trimmed (U+0020 only: a tab or
    newline is refused, not trimmed); InvalidRequest naming the rule it breaks
    (``_names.check_name``'s rules, at most ``MAX_NAME`` characters)."""
    return _names.check_name(f"{what} name", value.strip(" ") if isinstance(value, str) else value,
                             max_len=MAX_NAME)


def check_key(value: Any) -> str:
    """A project key given by the user, upper-cased."""
    if not isinstance(value, str) or not _KEY.fullmatch(value):
        raise InvalidRequest(f"a project key is 1 to {MAX_KEY} letters or digits, got {value!r}")
    return value.upper()


def key_candidates(name: str) -> Iterable[str]:
    """Keys for a project named ``name``, best first: its first letters, then numbered."""
    prefix = re.sub(r"[^A-Za-z0-9]", "", name).upper()[:3] or "PRJ"
    yield prefix
    for n in range(1, 100):
        yield f"{prefix}{n}"


def check_notes(value: Any) -> list[dict[str, str]]:
    """Project notes: a list of ``{"name": str, "contents": str}``."""
    if not isinstance(value, list):
        raise InvalidRequest("notes must be a list of {name, contents} objects")
    return [check_note(v, f"notes[{i}]") for i, v in enumerate(value)]


def check_note(value: Any, where: str = "the note") -> dict[str, str]:
    if not isinstance(value, dict):
        raise InvalidRequest(f"{where} must be an object with name and contents")
    name, contents = value.get("name", ""), value.get("contents", "")
    if not isinstance(name, str) or not isinstance(contents, str):
        raise InvalidRequest(f"{where}: name and contents must be strings")
    return {"name": name, "contents": contents}


def offset_window(offset: int, limit: int, total: int) -> tuple[int, int]:
    """Determined's paging: a negative offset counts from the end; limit 0 means all."""
    if offset < 0:
        offset = max(total + offset, 0)
    return offset, limit


# -- queries ------------------------------------------------------------------------------

def workspace_records(conn: sa.Connection, rows: list[Any]) -> list[WorkspaceRecord]:
    """Records for workspace rows (selected with ``username`` and ``pinned_at``)."""
    ids = [r.id for r in rows]
    if not ids:
        return []
    n_projects = dict(conn.execute(
        sa.select(t.projects.c.workspace_id, sa.func.count()).where(t.projects.c.workspace_id.in_(ids))
        .group_by(t.projects.c.workspace_id)).all())
    n_exps = dict(conn.execute(
        sa.select(t.projects.c.workspace_id, sa.func.count())
        .join(t.experiments, t.experiments.c.project_id == t.projects.c.id)
        .where(t.projects.c.workspace_id.in_(ids)).group_by(t.projects.c.workspace_id)).all())
    return [WorkspaceRecord(r.id, r.name, bool(r.archived), bool(r.immutable), r.user_id, r.username,
                            n_projects.get(r.id, 0), n_exps.get(r.id, 0), r.pinned_at) for r in rows]


def workspace_query(user_id: int) -> sa.Select:
    pins = t.workspace_pins
    return (sa.select(t.workspaces, t.users.c.username, pins.c.pinned_at)
            .join(t.users, t.users.c.id == t.workspaces.c.user_id)
            .outerjoin(pins, sa.and_(pins.c.workspace_id == t.workspaces.c.id, pins.c.user_id == user_id)))


def project_query() -> sa.Select:
    last = (sa.select(sa.func.max(t.experiments.c.start_time))
            .where(t.experiments.c.project_id == t.projects.c.id).scalar_subquery())
    return (sa.select(t.projects, t.users.c.username, t.workspaces.c.name.label("workspace_name"),
                      last.label("last_started"))
            .join(t.users, t.users.c.id == t.projects.c.user_id)
            .join(t.workspaces, t.workspaces.c.id == t.projects.c.workspace_id))


def project_records(conn: sa.Connection, rows: list[Any]) -> list[ProjectRecord]:
    """Records for project rows (selected by ``project_query``)."""
    ids = [r.id for r in rows]
    if not ids:
        return []
    e = t.experiments.c
    counts = {r.project_id: r for r in conn.execute(
        sa.select(e.project_id, sa.func.count().label("n"),
                  sa.func.sum(sa.case((e.state == State.ACTIVE.value, 1), else_=0)).label("active"))
        .where(e.project_id.in_(ids)).group_by(e.project_id)).all()}
    runs = dict(conn.execute(
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


def user_filter(query: sa.Select, owner_col: sa.ColumnElement, users: list[str] | None,
                user_ids: list[int] | None) -> sa.Select:
    if users:
        query = query.where(t.users.c.username.in_(users))
    if user_ids:
        query = query.where(owner_col.in_(user_ids))
    return query


def page(conn: sa.Connection, query: sa.Select, order: list[sa.ColumnElement], offset: int,
         limit: int) -> tuple[list[Any], int]:
    """One page of ``query`` in ``order``, and the total count."""
    total = conn.execute(sa.select(sa.func.count()).select_from(query.subquery())).scalar_one()
    offset, limit = offset_window(offset, limit, total)
    query = query.order_by(*order)
    if offset:
        query = query.offset(offset)
    if limit:
        query = query.limit(limit)
    return list(conn.execute(query).all()), total
