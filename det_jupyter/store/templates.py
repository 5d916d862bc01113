"""The config template store: templates by their cluster-wide name.

Every function takes an open ``sa.Connection`` (the caller chooses the transaction) and plain
values; rows come back as SQLAlchemy rows of the ``templates`` table. Writes return how many
rows they changed (0: no such template); checking names and configs, and the domain errors,
are ``services.experiments.templates``'.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import sqlalchemy as sa

from . import _tables as t


def get(conn: sa.Connection, name: str) -> sa.Row | None:
    """The template's row (None: no such template)."""
    return conn.execute(sa.select(t.templates).where(t.templates.c.name == name)).first()


def exists(conn: sa.Connection, name: str) -> bool:
    """Whether a template of that name is stored."""
    return bool(conn.execute(sa.select(t.templates.c.name).where(t.templates.c.name == name)).first())


def listed(conn: sa.Connection, *, name: str | None = None, workspace_ids: Collection[int] = (),
           visible: Collection[int] | None = None, descending: bool = False) -> list[sa.Row]:
    """Templates by name. ``name``: a case-insensitive substring; ``workspace_ids``: only those
    workspaces (none: all); ``visible``: only those workspaces either (None: all)."""
    c = t.templates.c
    q = sa.select(t.templates)
    if name:
        q = q.where(sa.func.lower(c.name).contains(name.lower(), autoescape=True))
    if workspace_ids:
        q = q.where(c.workspace_id.in_(workspace_ids))
    if visible is not None:
        q = q.where(c.workspace_id.in_(visible))
    q = q.order_by(c.name.desc() if descending else c.name)
    return list(conn.execute(q))


def insert(conn: sa.Connection, name: str, config: dict[str, Any], workspace_id: int) -> None:
    """Store a template (IntegrityError: the name is taken)."""
    conn.execute(sa.insert(t.templates).values(name=name, config=config, workspace_id=workspace_id))


def update(conn: sa.Connection, template: str, /, **values: Any) -> int:
    """Set the columns named in ``values`` (``name`` renames it) of the template named
    ``template``; how many rows changed."""
    return conn.execute(sa.update(t.templates).where(t.templates.c.name == template).values(**values)).rowcount


def delete(conn: sa.Connection, name: str) -> int:
    """Delete the template; how many rows went."""
    return conn.execute(sa.delete(t.templates).where(t.templates.c.name == name)).rowcount
