"""Task config policies: one JSON document per scope (a workspace id, ``GLOBAL`` for the
cluster) and workload type."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from . import _tables as t

#: The scope of the cluster-wide policies (workspace ids start at 1).
GLOBAL = 0
_C = t.config_policies.c


def get(conn: sa.Connection, scope: int, workload_type: str) -> dict[str, Any] | None:
    row = conn.execute(
        sa.select(_C.policy).where(_C.workspace_id == scope, _C.workload_type == workload_type)
    ).first()
    return None if row is None else dict(row.policy)


def put(
    conn: sa.Connection,
    scope: int,
    workload_type: str,
    policy: dict[str, Any],
    *,
    user_id: int,
    now: float,
) -> None:
    delete(conn, scope, workload_type)
    conn.execute(
        sa.insert(t.config_policies).values(
            workspace_id=scope,
            workload_type=workload_type,
            policy=policy,
            updated_by=user_id,
            updated_at=now,
        )
    )


def delete(conn: sa.Connection, scope: int, workload_type: str) -> int:
    return conn.execute(
        sa.delete(t.config_policies).where(
            _C.workspace_id == scope, _C.workload_type == workload_type
        )
    ).rowcount
