"""What a database holds from its first start: the cluster's id, and the Uncategorized
workspace and project (id 1, owned by ``admin``)."""

from __future__ import annotations

import uuid

import sqlalchemy as sa

from . import tables as t


def cluster_id(engine: sa.Engine, now: float) -> str:
    """The cluster's id: made at the first start, the same ever after."""
    with engine.begin() as conn:
        found = conn.execute(sa.select(t.cluster.c.cluster_id).where(t.cluster.c.id == 1)).scalar()
        if found:
            return str(found)
        cid = str(uuid.uuid4())
        conn.execute(sa.insert(t.cluster).values(id=1, cluster_id=cid, created_at=now))
        return cid


def ensure_uncategorized(engine: sa.Engine, now: float) -> None:
    """The Uncategorized workspace and project (id 1) exist from the first start (after the
    ``admin`` user does)."""
    with engine.begin() as conn:
        if conn.execute(sa.select(t.workspaces.c.id).where(t.workspaces.c.id == 1)).first():
            return
        admin = conn.execute(sa.select(t.users.c.id).where(t.users.c.username == "admin")).scalar_one()
        conn.execute(sa.insert(t.workspaces).values(
            id=1, name="Uncategorized", immutable=True, archived=False, user_id=admin))
        conn.execute(sa.insert(t.projects).values(
            id=1, workspace_id=1, name="Uncategorized", description="", immutable=True, archived=False,
            user_id=admin, key="UNCAT", notes=[], created_at=now,
        ))
        if conn.dialect.name == "postgresql":  # explicit ids leave the id sequences behind
            for table in ("workspaces", "projects"):
                conn.execute(sa.text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                     f"COALESCE(MAX(id), 0) + 1, false) FROM {table}"))
