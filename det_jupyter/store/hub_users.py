"""JupyterHub's view of a user carried into det: the admin flag, and the members of det groups
that are hub groups (``user_groups.from_hub``; ``users.admin_from_hub``, migration 18).

Every function takes an open ``sa.Connection`` (the caller chooses the transaction).
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa

from . import _tables as t

CLUSTER_ADMIN = "ClusterAdmin"


def sync_admin(conn: sa.Connection, user_id: int, hub_admin: bool) -> bool:
    """Make the user a ClusterAdmin when the hub says admin; take it back when the hub says
    not, but only where the hub gave it (an admin made in det stays one). Whether it changed."""
    u, ra = t.users.c, t.role_assignments.c
    row = conn.execute(sa.select(u.admin, u.admin_from_hub).where(u.id == user_id)).first()
    if row is None:
        return False
    if hub_admin and not row.admin:
        conn.execute(sa.update(t.users).where(u.id == user_id).values(admin=True, admin_from_hub=True))
        found = conn.execute(sa.select(ra.id).where(
            ra.role == CLUSTER_ADMIN, ra.user_id == user_id, ra.group_id.is_(None),
            ra.workspace_id.is_(None))).first()
        if found is None:
            conn.execute(sa.insert(t.role_assignments).values(
                role=CLUSTER_ADMIN, user_id=user_id, group_id=None, workspace_id=None))
        return True
    if not hub_admin and row.admin and row.admin_from_hub:
        conn.execute(sa.update(t.users).where(u.id == user_id).values(admin=False, admin_from_hub=False))
        conn.execute(sa.delete(t.role_assignments).where(
            ra.role == CLUSTER_ADMIN, ra.user_id == user_id, ra.group_id.is_(None),
            ra.workspace_id.is_(None)))
        return True
    return False


def sync_groups(conn: sa.Connection, user_id: int, names: Iterable[str]) -> bool:
    """Make the user a member of exactly the hub groups ``names`` among det's hub groups: each
    is made (or, where a det group of that name exists, adopted) as a hub group; the user
    leaves the hub groups not named. Groups made in det and unknown to the hub are left alone.
    Whether anything changed."""
    g, m = t.user_groups.c, t.group_members.c
    wanted: dict[int, str] = {}
    changed = False
    for name in dict.fromkeys(names):
        row = conn.execute(sa.select(g.id, g.from_hub).where(g.name == name)).first()
        if row is None:
            key = conn.execute(sa.insert(t.user_groups).values(name=name, from_hub=True)).inserted_primary_key
            assert key is not None
            wanted[int(key[0])] = name
            changed = True
        else:
            if not row.from_hub:
                conn.execute(sa.update(t.user_groups).where(g.id == row.id).values(from_hub=True))
                changed = True
            wanted[row.id] = name
    have = set(conn.execute(
        sa.select(m.group_id).join(t.user_groups, g.id == m.group_id)
        .where(m.user_id == user_id, g.from_hub.is_(True))).scalars())
    add = [gid for gid in wanted if gid not in have]
    drop = [gid for gid in have if gid not in wanted]
    if add:
        conn.execute(sa.insert(t.group_members), [{"group_id": gid, "user_id": user_id} for gid in add])
    if drop:
        conn.execute(sa.delete(t.group_members).where(m.user_id == user_id, m.group_id.in_(drop)))
    return changed or bool(add or drop)
